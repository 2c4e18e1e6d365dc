"""The demo's drawing helpers: plain functions on artifacts."""

from __future__ import annotations

import dataclasses

import numpy as np

from cascade.artifacts import Box, Detection, Evidence, Frame, Image, OcrLine, Route
from cascade.serve.render import (
    DET_COLOR,
    OCR_COLOR,
    TILE_COLOR,
    bill_figure,
    bill_markdown,
    evidence_gallery,
    overview,
    route_markdown,
    tools_markdown,
)


def _evidence() -> Evidence:
    frame = Frame(np.full((240, 320, 3), 90, np.uint8), source="v.mp4", timestamp=2.0, index=20)
    tile = frame.crop(Box(160, 0, 320, 120))
    return Evidence(
        images=(frame.resized(160, 120), tile),
        ocr_lines=(OcrLine("OPEN", 0.98, Box(20, 20, 120, 60), timestamp=2.0),),
        detections=(Detection("person", 0.9, Box(200, 100, 300, 230), timestamp=2.0),),
        routes=(Route("high_res", "text is small", {"edge": 0.12}),),
        scores=(0.31,),
    )


def test_gallery_captions_time_tile_and_score():
    items = evidence_gallery(_evidence())
    assert len(items) == 2
    assert "t=2.0s" in items[0][1] and "score 0.310" in items[0][1] and "tile" not in items[0][1]
    assert "tile 160,0-320,120" in items[1][1]


def test_overview_draws_tiles_ocr_and_detections_in_source_coords():
    ((pic, caption),) = overview(_evidence(), width=320)  # scale 1: source pixels
    px = np.asarray(pic)
    assert pic.size == (320, 240)
    assert "1 high-res tile" in caption and "1 OCR line" in caption and "1 detection" in caption
    assert tuple(px[60, 160]) == TILE_COLOR  # left edge of the tile box
    assert tuple(px[40, 20]) == OCR_COLOR
    assert tuple(px[230, 250]) == DET_COLOR


def test_overview_uses_original_images_when_given():
    img = Image(np.zeros((100, 200, 3), np.uint8), media_index=0)
    ev = Evidence(images=(img.resized(50, 25), img.crop(Box(0, 0, 100, 100))))
    src = np.full((100, 200, 3), 255, np.uint8)
    ((pic, _),) = overview(ev, {0: src}, width=200)
    assert np.asarray(pic)[50, 150].tolist() == [255, 255, 255]


def test_bill_figure_and_tables():
    bill = {
        "visual_tokens": 300,
        "baseline_visual_tokens": 2400,
        "prefill_flops": 1e12,
        "baseline_prefill_flops": 9e12,
        "seconds": 0.8,
        "baseline_seconds_estimate": 3.1,
        "visual_token_savings": 8.0,
        "prefill_savings": 9.0,
    }
    fig = bill_figure(bill)
    assert len(fig.axes) == 3 and [len(ax.patches) for ax in fig.axes] == [2, 2, 2]
    assert fig.axes[2].patches[1].get_hatch() == "//"  # the time baseline is an estimate
    md = bill_markdown(bill)
    assert "8.0x" in md and "9.0x" in md and "(est.)" in md
    assert "no VLM call" in bill_markdown(
        {
            "visual_tokens": 0,
            "baseline_visual_tokens": 900,
            "visual_token_savings": 900.0,
            "seconds": 0.2,
        }
    )
    # Every panel keeps its baseline slot; an unknown baseline says so instead of vanishing.
    tool = bill_figure(
        {"visual_tokens": 0, "baseline_visual_tokens": 900, "prefill_flops": 0.0, "seconds": 0.2}
    )
    assert [len(ax.patches) for ax in tool.axes] == [2, 2, 2]
    assert [[t.get_text() for t in ax.texts] for ax in tool.axes] == [
        ["0", "900"],
        ["0", "n/a"],
        ["0.20", "n/a"],
    ]


def test_route_and_tools_text():
    ev = _evidence()
    assert "high_res" in route_markdown(ev, "vlm") and "text is small" in route_markdown(ev, "vlm")
    assert "tool" in route_markdown(ev, "tool")
    t = tools_markdown(ev)
    assert "OPEN" in t and "person" in t
    assert "No OCR" in tools_markdown(dataclasses.replace(ev, ocr_lines=(), detections=()))
