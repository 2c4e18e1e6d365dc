"""ocr (rapidocr, real PP-OCR ONNX models) and detect (real YOLO11n ONNX), boxes in source
coords."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from cascade.artifacts import Box, Image
from cascade.eval.render import render_text_image

TEXTS = ["PARKING LEVEL 3", "EXIT 42B NORTH"]


@pytest.mark.parametrize("font_size", [16, 20])
def test_ocr_reads_full_resolution_but_not_a_4x_thumbnail(stage, font_size):
    """The reason a cascade exists: text a specialist reads exactly at full resolution is gone
    from a 4x-downscaled copy (what a thumbnail-only look sees)."""
    ocr = stage("ocr")
    images = [
        Image(render_text_image(t, font_size=font_size, size=(480, 160)), media_index=i)
        for i, t in enumerate(TEXTS)
    ]
    full = ocr(images=images)
    assert [line.text for line in full.lines] == TEXTS
    assert all(line.confidence > 0.9 for line in full.lines)
    small = ocr(images=[im.resized(120, 40) for im in images])
    read_small = [line.text for line in small.lines]
    assert not set(read_small) & set(TEXTS), f"4x-downscaled text was still read: {read_small}"


@pytest.mark.slow
def test_ocr_boxes_in_source_coordinates_from_a_crop(stage):
    canvas = np.full((600, 900, 3), 255, np.uint8)
    sign = render_text_image("FIRE EXIT", font_size=28)
    canvas[400 : 400 + sign.shape[0], 500 : 500 + sign.shape[1]] = sign
    src = Image(canvas, source="wall.png")
    crop = src.crop(Box(450, 350, 900, 600))
    out = stage("ocr")(images=[src, crop])
    assert [line.text for line in out.lines] == ["FIRE EXIT", "FIRE EXIT"]
    a, b = (line.box for line in out.lines)
    region = Box(494, 394, 506 + sign.shape[1], 406 + sign.shape[0])  # the pasted sign, +6 px
    assert region.union(a) == region and region.union(b) == region
    assert a.iou(b) > 0.75


def test_ocr_detect_mode_reports_density(stage):
    blank = Image(np.full((200, 400, 3), 255, np.uint8))
    text = Image(render_text_image("DENSITY TEST", font_size=40, size=(400, 200)))
    out = stage("ocr", mode="detect")(images=[blank, text])
    assert out.line_counts == [0, 1] and out.text == ""
    assert out.density[0] == 0.0 and 0.1 < out.density[1] < 0.5
    assert out.lines[0].text == "" and out.lines[0].box.width > 200


def test_paddle_backend_names_the_extra(stage, monkeypatch):
    monkeypatch.setitem(sys.modules, "paddleocr", None)  # as if the extra were not installed
    ocr = stage("ocr", backend="paddleocr", model_dir="/nowhere")
    with pytest.raises(RuntimeError, match=r"vlm-cascade\[paddle\]"):
        ocr(images=Image(np.zeros((8, 8, 3), np.uint8)))


@pytest.fixture(scope="module")
def bus_detections(stage, yolo_weights, bus_path):
    bus = Image.open(bus_path)
    return bus, stage("detect", weights=yolo_weights)(images=bus)


def test_detect_finds_bus_and_people(bus_detections):
    _, out = bus_detections
    assert out.counts.get("bus") == 1 and out.counts.get("person", 0) >= 4
    bus_box = next(d.box for d in out.detections if d.label == "bus")
    assert bus_box.iou(Box(12, 228, 799, 735)) > 0.9


@pytest.mark.slow
def test_detect_after_crop_and_tiles_maps_to_source(stage, yolo_weights, bus_detections):
    bus, full = bus_detections
    det = stage("detect", weights=yolo_weights, classes=["person", "bus"])
    people = [d for d in full.detections if d.label == "person" and d.confidence > 0.5]
    # crop around the full-image detections, then detect again on the crops: same places
    crops = stage("crop_regions", padding=40, merge=False)(images=bus, detections=people).crops
    again = det(images=crops)
    for p in people:
        best = max((d.box.iou(p.box) for d in again.detections if d.label == "person"), default=0)
        assert best > 0.8, f"person at {p.box} not re-found in source coordinates"
    # tiles: the bus is cut across tiles, but every tile's boxes lie inside that tile's source box
    tiles = stage("tiles", tile_size=640, max_tiles=2)(images=bus).tiles
    on_tiles = det(images=tiles)
    assert on_tiles.counts.get("person", 0) >= 3
    for d in on_tiles.detections:
        tile = next(t for t in tiles if t.box.intersects(d.box))
        assert d.box.x0 >= tile.box.x0 - 1 and d.box.x1 <= tile.box.x1 + 1
    ped = [d.box for d in on_tiles.detections if d.label == "person"]
    assert sum(max(b.iou(p.box) for b in ped) > 0.5 for p in people) >= 3


def test_detect_cache_and_bad_params(stage, yolo_weights, bus_path):
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        stage("detect", conf=2)
    with pytest.raises(ValueError, match="unknown class 'persn'.*did you mean 'person'"):
        stage("detect", weights=yolo_weights, classes=["persn"])(images=Image.open(bus_path))
    with pytest.raises(RuntimeError, match="cannot load YOLO weights '/nowhere/x.onnx'"):
        stage("detect", weights="/nowhere/x.onnx")(images=Image.open(bus_path))


@pytest.mark.slow
def test_indexed_ocr_and_detections_are_read_back_not_recomputed(
    stage, yolo_weights, bus_path, tmp_path, monkeypatch
):
    """With the index on, a new process (here: every cache emptied) reads the frames' OCR lines
    and detections from the video's index folder instead of running the models again."""
    import json

    from cascade.cache import clear_all_caches

    video = tmp_path / "clip.mp4"  # only names the index folder: <video>.cascade-index
    frames = [
        Image(render_text_image(t, font_size=20, size=(480, 160)), media_index=0) for t in TEXTS
    ] + [Image.open(bus_path)]
    first = {
        "ocr": stage("ocr", video_index=True)(images=frames, video=video),
        "detect": stage("detect", weights=yolo_weights, video_index=True)(
            images=frames, video=video
        ),
    }
    saved = sorted((tmp_path / "clip.mp4.cascade-index").glob("*.json"))
    assert [p.name.split("-")[0] for p in saved] == ["detect", "ocr"]
    assert all(len(json.loads(p.read_text())["results"]) == 3 for p in saved)

    clear_all_caches()
    calls = []
    ocr = stage("ocr", video_index=True)
    det = stage("detect", weights=yolo_weights, video_index=True)
    for s, method in ((ocr, "_read"), (det, "_predict")):
        s.ensure_setup()
        real = getattr(s, method)
        monkeypatch.setattr(s, method, lambda *a, real=real: calls.append(a) or real(*a))
    again = {"ocr": ocr(images=frames, video=video), "detect": det(images=frames, video=video)}
    assert calls == []
    assert again["ocr"].lines == first["ocr"].lines
    assert again["detect"].detections == first["detect"].detections
    # without the video input nothing is saved or read: the results are computed
    clear_all_caches()
    ocr(images=frames[:1])
    assert len(calls) == 1


def test_ocr_line_angle_follows_turned_text(stage):
    from PIL import Image as PILImage

    level = render_text_image("PLATFORM 9 NORTH", font_size=28, padding=40)
    turned = PILImage.fromarray(level).rotate(5, expand=True, fillcolor="white")  # anticlockwise
    (flat,), (tilted,) = (
        stage("ocr")(images=Image(np.asarray(px))).lines for px in (level, turned)
    )
    assert flat.text == tilted.text == "PLATFORM 9 NORTH"
    assert abs(flat.angle) < 1 and 3.5 < tilted.angle < 6.5, (flat.angle, tilted.angle)


def test_results_saved_before_lines_had_an_angle_read_as_level(stage, tmp_path):
    import json

    from PIL import Image as PILImage

    from cascade.cache import clear_all_caches

    video = tmp_path / "clip.mp4"
    frames = [
        Image(
            np.asarray(
                PILImage.fromarray(render_text_image(t, font_size=24, padding=40)).rotate(
                    4, expand=True, fillcolor="white"
                )
            )
        )
        for t in TEXTS
    ]
    first = stage("ocr", video_index=True)(images=frames, video=video).lines
    assert all(ln.angle > 2 for ln in first)  # so a level reading below came from the file
    (saved,) = (tmp_path / "clip.mp4.cascade-index").glob("ocr-*.json")
    data = json.loads(saved.read_text())
    data["results"] = {k: [entry[:3] for entry in v] for k, v in data["results"].items()}
    saved.write_text(json.dumps(data))  # the three-field format
    clear_all_caches()
    again = stage("ocr", video_index=True)(images=frames, video=video).lines
    assert [(ln.text, ln.box) for ln in again] == [(ln.text, ln.box) for ln in first]
    assert all(ln.angle == 0.0 for ln in again)
