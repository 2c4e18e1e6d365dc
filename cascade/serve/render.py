"""Pictures of an answer's evidence and bill, as plain functions (used by the demo, unit-tested).

- `evidence_gallery`: every image the VLM saw, captioned with place, time and retrieval score.
- `overview`: per source frame/image with pixels, a picture of where the cascade looked: the
  whole image (or what was seen, pasted at its source position), high-resolution tiles outlined
  (orange), OCR lines (blue) and detections (red) drawn with their text/labels.
- `bill_figure`: visual tokens, prefill FLOPs and time, cascade vs the full-resolution baseline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..artifacts import Box, Evidence, Image

__all__ = [
    "evidence_gallery",
    "overview",
    "bill_figure",
    "bill_markdown",
    "route_markdown",
    "tools_markdown",
    "place_of",
    "TILE_COLOR",
    "OCR_COLOR",
    "DET_COLOR",
]

TILE_COLOR, OCR_COLOR, DET_COLOR = (255, 140, 0), (30, 110, 255), (230, 30, 30)


def place_of(item: Any) -> tuple[int, float | None]:
    """(media index, timestamp rounded to ms) — which source frame/image something belongs to."""
    ts = getattr(item, "timestamp", None)
    return int(getattr(item, "media_index", 0)), None if ts is None else round(float(ts), 3)


def _where(place: tuple[int, float | None], names: Mapping[int, str] | None = None) -> str:
    """A frame by its time; an image by the name the caller gave it (a file, a PDF's page), else
    its index."""
    idx, ts = place
    return f"t={ts:.1f}s" if ts is not None else (names or {}).get(idx, f"image {idx}")


def _is_whole(im: Image) -> bool:
    w, h = im.source_size
    b = im.box
    return b.x0 <= 0.5 and b.y0 <= 0.5 and b.x1 >= w - 0.5 and b.y1 >= h - 0.5


def _scores_by_image(ev: Evidence) -> list[float | None]:
    """Retrieval score per evidence image: aligned lists, or one score per place in order."""
    n = len(ev.images)
    if not ev.scores:
        return [None] * n
    if len(ev.scores) == n:
        return list(ev.scores)
    places = sorted({place_of(im) for im in ev.images}, key=lambda p: (p[0], p[1] or 0.0))
    if len(places) == len(ev.scores):
        by_place = dict(zip(places, ev.scores, strict=True))
        return [by_place[place_of(im)] for im in ev.images]
    return [None] * n


def evidence_gallery(ev: Evidence, names: Mapping[int, str] | None = None) -> list[tuple[Any, str]]:
    """(PIL image, caption) for each image the VLM saw; `names`: media index -> name to show."""
    out = []
    for im, score in zip(ev.images, _scores_by_image(ev), strict=True):
        parts = [_where(place_of(im), names)]
        if not _is_whole(im):
            b = im.box
            parts.append(f"tile {int(b.x0)},{int(b.y0)}-{int(b.x1)},{int(b.y1)}")
        parts.append(f"{im.width}x{im.height}px")
        if score is not None:
            parts.append(f"score {score:.3f}")
        out.append((im.to_pil(), " · ".join(parts)))
    return out


def _draw_box(draw, box: Box, scale: float, color, label: str = "", width: int = 2) -> None:
    x0, y0, x1, y1 = (v * scale for v in box.as_tuple())
    draw.rectangle([x0, y0, x1, y1], outline=color, width=width)
    if label:
        ty = max(0.0, y0 - 12)
        draw.rectangle([x0, ty, x0 + 6 * len(label) + 4, ty + 12], fill=color)
        draw.text((x0 + 2, ty), label, fill=(255, 255, 255))


def overview(
    ev: Evidence,
    sources: dict[int, np.ndarray] | None = None,
    width: int = 480,
    names: Mapping[int, str] | None = None,
) -> list[tuple[Any, str]]:
    """One annotated picture per source frame/image the evidence touches, with a caption.

    sources: the original pixels by media index (images); without them the picture is built from
    the evidence itself (a video frame seen whole at low resolution, tiles pasted where they were).
    """
    from PIL import Image as PILImage
    from PIL import ImageDraw

    groups: dict[tuple[int, float | None], dict[str, list]] = {}
    for kind, items in (("images", ev.images), ("ocr", ev.ocr_lines), ("dets", ev.detections)):
        for it in items:
            groups.setdefault(place_of(it), {"images": [], "ocr": [], "dets": []})[kind].append(it)
    out = []
    for place in sorted(groups, key=lambda p: (p[0], p[1] or 0.0)):
        g = groups[place]
        if sources and place[1] is None and place[0] in sources:
            base = PILImage.fromarray(sources[place[0]])
            src_w, src_h = base.size
        elif g["images"]:
            base = None
            src_w, src_h = g["images"][0].source_size
        else:  # tools read a frame nobody kept pixels of: nothing to show (tools_markdown lists it)
            continue
        scale = width / max(src_w, 1)
        size = (width, max(1, round(src_h * scale)))
        canvas = (
            base.resize(size) if base is not None else PILImage.new("RGB", size, (200, 200, 200))
        )
        for im in sorted(g["images"], key=lambda i: -i.box.area):
            if base is None:  # paste what was seen where it sits in the source
                b = im.box
                w, h = max(1, round(b.width * scale)), max(1, round(b.height * scale))
                canvas.paste(im.to_pil().resize((w, h)), (round(b.x0 * scale), round(b.y0 * scale)))
        draw = ImageDraw.Draw(canvas)
        tiles = [im for im in g["images"] if not _is_whole(im)]
        for im in tiles:
            _draw_box(draw, im.box, scale, TILE_COLOR, width=3)
        for line in g["ocr"]:
            _draw_box(draw, line.box, scale, OCR_COLOR, line.text[:24])
        for det in g["dets"]:
            _draw_box(draw, det.box, scale, DET_COLOR, f"{det.label} {det.confidence:.2f}")
        caption = (
            f"{_where(place, names)}: {len(tiles)} high-res tile(s), {len(g['ocr'])} OCR line(s), "
            f"{len(g['dets'])} detection(s)"
        )
        out.append((canvas, caption))
    return out


def _human(x: float) -> str:
    for unit, f in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= f:
            return f"{x / f:.1f}{unit}"
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.2f}"


def _baseline_seconds(bill: dict[str, Any]) -> tuple[float | None, bool]:
    """(full-resolution seconds, whether that is an estimate rather than a measurement)."""
    if bill.get("baseline_seconds") is not None:
        return float(bill["baseline_seconds"]), False
    est = bill.get("baseline_seconds_estimate")
    return (None, False) if est is None else (float(est), True)


def bill_figure(bill: dict[str, Any]):
    """Three bar pairs: visual tokens, prefill FLOPs, seconds — cascade vs the full-res baseline.
    An estimated baseline is hatched and labelled "est."; an unknown one is written "n/a"."""
    from matplotlib.figure import Figure  # no pyplot: leaves a notebook's backend alone

    base_s, estimated = _baseline_seconds(bill)
    panels = [
        ("visual tokens", bill.get("visual_tokens"), bill.get("baseline_visual_tokens"), False),
        ("prefill FLOPs", bill.get("prefill_flops"), bill.get("baseline_prefill_flops"), False),
        ("seconds", bill.get("seconds"), base_s, estimated),
    ]
    fig = Figure(figsize=(7.5, 2.6), dpi=100)
    for i, (title, ours, base, est) in enumerate(panels):
        ax = fig.add_subplot(1, 3, i + 1)
        values = [float(ours or 0), float(base or 0)]
        bars = ax.bar(
            ["cascade", "full-res\n(est.)" if est else "full-res"],
            values,
            color=["#2b8a3e", "#adb5bd"],
        )
        if est:
            bars[1].set_hatch("//")
        for b, v, known in zip(bars, values, (True, base is not None), strict=True):
            ax.annotate(
                _human(v) if known else "n/a",
                (b.get_x() + b.get_width() / 2, v),
                ha="center",
                va="bottom",
                fontsize=8,
            )
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.set_yticks([])
        ax.margins(y=0.2)
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
    fig.tight_layout()
    return fig


def bill_markdown(bill: dict[str, Any]) -> str:
    def cell(v: Any) -> str:
        return "—" if v is None else _human(float(v))

    rows = [
        (
            "visual tokens",
            bill.get("visual_tokens"),
            bill.get("baseline_visual_tokens"),
            bill.get("visual_token_savings"),
        ),
        (
            "prefill FLOPs",
            bill.get("prefill_flops"),
            bill.get("baseline_prefill_flops"),
            bill.get("prefill_savings"),
        ),
    ]
    lines = ["| | cascade | full-res baseline | saving |", "|---|---:|---:|---:|"]
    for name, ours, base, saving in rows:
        # no VLM call: a tool answered, the VLM never ran
        shown = "no VLM call" if base and not ours else "—" if not saving else f"{saving:.1f}x"
        lines.append(f"| {name} | {cell(ours)} | {cell(base)} | {shown} |")
    base_s, estimated = _baseline_seconds(bill)
    lines.append(
        f"| seconds | {bill.get('seconds', 0):.2f} | "
        f"{'—' if base_s is None else f'{base_s:.2f}'}"
        f"{' (est.)' if base_s is not None and estimated else ''} | |"
    )
    if base_s is not None and estimated:
        lines.append(
            "\nFull-res seconds are estimated, not measured: this answer's time with its "
            "VLM time scaled by the baseline's FLOPs at the throughput the VLM reached."
        )
    return "\n".join(lines)


def route_markdown(ev: Evidence, produced_by: str) -> str:
    who = "a tool (OCR/detector)" if produced_by == "tool" else "the VLM"
    lines = [f"**Answered by {who}.**"]
    for r in ev.routes:
        scores = ", ".join(f"{k}={v:.3g}" for k, v in sorted(r.scores.items()))
        lines.append(
            f"- route **{r.branch}**: {r.reason or '(no reason given)'}"
            + (f" ({scores})" if scores else "")
        )
    if not ev.routes:
        lines.append("- no router in this pipeline")
    return "\n".join(lines)


def tools_markdown(ev: Evidence, limit: int = 12, names: Mapping[int, str] | None = None) -> str:
    lines = []
    if ev.ocr_lines:
        lines.append(
            "**OCR read:** "
            + "; ".join(
                f"“{o.text}” ({o.confidence:.2f}, {_where(place_of(o), names)})"
                for o in ev.ocr_lines[:limit]
            )
        )
    if ev.detections:
        lines.append(
            "**Detected:** "
            + "; ".join(
                f"{d.label} {d.confidence:.2f} ({_where(place_of(d), names)})"
                for d in ev.detections[:limit]
            )
        )
    return "\n\n".join(lines) or "_No OCR lines or detections in the evidence._"
