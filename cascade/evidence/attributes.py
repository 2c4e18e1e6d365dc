"""Which text blocks have the attributes a `Query` names: plate colour, position, order in time.

`select(query, blocks, images, detections)` keeps the blocks that fit and says why, and whether
the choice is *sure* (the attribute was measured and singles the blocks out) or a recall-first
fallback (the attribute could not be measured, or nothing fits it: every block is kept, so the
evidence is sent rather than guessed). Measured, never guessed:

- **colour**: the plate colour of a sign, the larger of two colour clusters inside the text's
  box (the ink is the smaller), named from its hue, saturation and value; when no plate has the
  colour (a dim red read as brown), every block is kept and the choice is not sure;
- **position**: the block's centre in its frame; the blocks at the named side (within a quarter
  of the frame of the most extreme one) are kept;
- **time order**: frame timestamps (image sets: their order). `before` / `after` are relative to
  the first time the *anchor* is seen: the text it quotes or names, the object label it names
  (detections), or, when it names only a size ("the big banner"), the tallest text; the anchor's
  own blocks (and partial or misread copies of its text) are never kept. `first` / `last` keep the
  text(s) that first appear earliest / latest, leaving out text shown all along (a caption on every
  frame).
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass

import numpy as np

from cascade.artifacts import Detection, Image

from .blocks import ByFrame, TextBlock, norm_text
from .query import Query, has_cue
from .textmatch import ABBREVIATED, COVERS, EXACT, FUZZY, key_match

__all__ = ["Selection", "select", "plate_colour", "colour_name", "block_time"]


@dataclass(frozen=True)
class Selection:
    """The blocks kept, why, and whether the attributes single them out (`sure`)."""

    blocks: tuple[TextBlock, ...]
    reasons: tuple[str, ...] = ()
    sure: bool = True
    anchors: tuple[TextBlock, ...] = ()
    window: tuple[float, float] | None = None  # before / after: the times the target may be at

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


def colour_name(rgb: tuple[float, float, float]) -> str:
    """A basic colour name for an RGB triple (0-255): black / white / grey by value and
    saturation, else red, orange, yellow, green, blue, purple, pink, brown by hue."""
    h, s, v = colorsys.rgb_to_hsv(*(c / 255.0 for c in rgb))
    if v < 0.2:
        return "black"
    if s < 0.2 or (s < 0.3 and v > 0.85):
        return "white" if v > 0.75 else "grey" if v > 0.3 else "black"
    hue = h * 360
    if hue < 15 or hue >= 345:
        return "brown" if v < 0.5 else "red"
    if hue < 40:
        return "brown" if v < 0.55 else "orange"
    if hue < 70:
        return "yellow"
    if hue < 165:
        return "green"
    if hue < 255:
        return "blue"
    if hue < 290:
        return "purple"
    return "pink"


def plate_colour(image: Image, block: TextBlock) -> tuple[str, float]:
    """(colour name, share of the box's pixels) of the plate behind a block's text: 2-means on
    the pixels inside the block's box, the larger cluster being the plate (text strokes cover
    well under half of a text box)."""
    px = image.crop(block.box).pixels.reshape(-1, 3).astype(np.float32)
    if len(px) > 4096:  # a sample is as good as all of them for two clusters
        px = px[np.linspace(0, len(px) - 1, 4096).astype(int)]
    luma = px @ np.array([0.299, 0.587, 0.114], np.float32)
    centres = np.stack([px[luma.argmin()], px[luma.argmax()]])
    for _ in range(8):
        assign = ((px[:, None, :] - centres[None]) ** 2).sum(-1).argmin(1)
        centres = np.stack(
            [px[assign == k].mean(0) if (assign == k).any() else centres[k] for k in (0, 1)]
        )
    counts = np.bincount(assign, minlength=2)
    plate = int(counts.argmax())
    return colour_name(tuple(centres[plate])), float(counts[plate] / counts.sum())


def block_time(block: TextBlock) -> float:
    """Where a block sits in time: its frame's timestamp, else its image's position in the set."""
    return block.timestamp if block.timestamp is not None else float(block.media_index)


def _by_colour(query: Query, blocks: list[TextBlock], frames: ByFrame) -> Selection:
    named = {}
    for b in blocks:
        owner = frames.owner(b.box, b.media_index, b.timestamp)
        if owner is not None:
            named[b] = plate_colour(frames.images[owner], b)[0]
    if not named:
        return Selection(
            tuple(blocks),
            (f"colour {query.colour}: no pixels to measure; all {len(blocks)} kept",),
            False,
        )
    exact = [b for b in blocks if named.get(b) == query.colour]
    seen = ", ".join(sorted(set(named.values())))
    if exact:
        return Selection(
            tuple(exact),
            (
                f"colour {query.colour}: {len(exact)} of {len(blocks)} "
                f"text(s) on a {query.colour} plate (plates seen: {seen})",
            ),
        )
    return Selection(
        tuple(blocks),
        (f"colour {query.colour}: no plate of that colour (seen: {seen}); all {len(blocks)} kept",),
        False,
    )


def _by_position(query: Query, blocks: list[TextBlock], frames: ByFrame) -> Selection:
    def score(b: TextBlock) -> float:
        size = frames.source_size(b.media_index, b.timestamp) or (b.box.x1, b.box.y1)
        cx, cy = (b.box.x0 + b.box.x1) / 2 / size[0], (b.box.y0 + b.box.y1) / 2 / size[1]
        parts = {
            "left": 1 - cx,
            "right": cx,
            "top": 1 - cy,
            "bottom": cy,
            "centre": 1 - 2 * max(abs(cx - 0.5), abs(cy - 0.5)),
        }
        assert query.position is not None  # select() asks only for a query with a position
        sides = query.position.split("-")
        return sum(parts[s] for s in sides) / len(sides)

    scores = {b: score(b) for b in blocks}
    best = max(scores.values())
    kept = [b for b in blocks if scores[b] >= best - 0.25]
    return Selection(
        tuple(kept),
        (f"position {query.position}: {len(kept)} of {len(blocks)} text(s) at that side",),
        len(kept) < len(blocks) or len(kept) == 1,
    )


def _anchor(
    query: Query, blocks: list[TextBlock], detections: list[Detection], frames: ByFrame
) -> tuple[list[float], list[TextBlock], str]:
    """(times the anchor is seen, its blocks, what it was taken to be)."""
    order = query.time_order
    assert order is not None  # _by_time asks only for a query with a time order
    if order.anchor_cues:
        named = [b for b in blocks if has_cue(b.text, order.anchor_cues)]
        if named:
            return sorted(block_time(b) for b in named), named, f"text '{named[0].text}'"
    if order.anchor_label:
        seen = [d for d in detections if d.label == order.anchor_label]
        if seen:
            times = sorted(
                d.timestamp if d.timestamp is not None else float(d.media_index) for d in seen
            )
            return times, [], f"{order.anchor_label} (detector)"
    if order.anchor_colour:
        coloured = _by_colour(
            Query(
                query.question,
                query.language,
                query.intent,
                query.target,
                colour=order.anchor_colour,
            ),
            blocks,
            frames,
        )
        if coloured.sure:
            return (
                sorted(block_time(b) for b in coloured.blocks),
                list(coloured.blocks),
                f"the {order.anchor_colour} text",
            )
    if order.anchor_size and len(blocks) > 1:
        heights = np.array([b.line_height for b in blocks])
        pick = heights.max() if order.anchor_size == "big" else heights.min()
        others = heights[heights != pick]
        # only a size that stands out: the banner's text is clearly taller than the rest
        if others.size and (
            pick >= 1.4 * np.median(others)
            if order.anchor_size == "big"
            else pick <= np.median(others) / 1.4
        ):
            sized = [b for b in blocks if abs(b.line_height - pick) <= 0.15 * pick]
            return (
                sorted(block_time(b) for b in sized),
                sized,
                f"the {'tallest' if order.anchor_size == 'big' else 'smallest'} "
                f"text '{sized[0].text}'",
            )
    return [], [], ""


def _read_again(anchor: str, text: str) -> bool:
    """`text` is the anchor read again: the same text, a part of it, or a misread of it (OCR reads
    a banner a little differently on each frame; none of those is the text after it)."""
    score = key_match(anchor, text)
    return score in (EXACT, COVERS) or FUZZY <= score < ABBREVIATED


def _by_time(
    query: Query, blocks: list[TextBlock], detections: list[Detection], frames: ByFrame
) -> Selection:
    order = query.time_order
    assert order is not None  # select() asks only for a query with a time order
    if order.relation in ("first", "last"):
        first_seen: dict[str, float] = {}
        for b in blocks:
            first_seen[norm_text(b.text)] = min(
                first_seen.get(norm_text(b.text), np.inf), block_time(b)
            )
        times = sorted({block_time(b) for b in blocks})
        shown = {k: sum(1 for b in blocks if norm_text(b.text) == k) for k in first_seen}
        moving = {k for k, n in shown.items() if n < 0.8 * len(times)} or set(first_seen)
        edge = (min if order.relation == "first" else max)(first_seen[k] for k in moving)
        keys = {k for k in moving if abs(first_seen[k] - edge) <= 1.0}
        kept = [b for b in blocks if norm_text(b.text) in keys]
        return Selection(
            tuple(kept),
            (f"order {order.relation}: {len(keys)} text(s) first seen at {edge:.1f}",),
            len(keys) == 1,
        )
    times, anchors, what = _anchor(query, blocks, detections, frames)
    if not times:
        return Selection(
            tuple(blocks),
            (
                f"order {order.describe()}: the anchor was not found; "
                f"all {len(blocks)} text(s) kept",
            ),
            False,
        )
    start = times[0]
    rest = [b for b in blocks if not any(_read_again(a.text, b.text) for a in anchors)]
    window = (start, np.inf) if order.relation == "after" else (-np.inf, start)
    kept = [b for b in rest if window[0] < block_time(b) < window[1]]
    n = len({norm_text(b.text) for b in kept})
    return Selection(
        tuple(kept),
        (
            f"order {order.describe()}: anchor {what} first seen at "
            f"{start:.1f}; {n} other text(s) {order.relation} it",
        ),
        n == 1,
        tuple(anchors),
        window,
    )


def select(
    query: Query,
    blocks: list[TextBlock],
    images: list[Image] | ByFrame | None = None,
    detections: list[Detection] | None = None,
) -> Selection:
    """The blocks that have the query's colour, position and time order (each measured, see the
    module docstring). Without such attributes every block is kept, and that is sure."""
    frames = images if isinstance(images, ByFrame) else ByFrame(images)
    reasons: list[str] = []
    anchors: tuple[TextBlock, ...] = ()
    window: tuple[float, float] | None = None
    kept, sure = list(blocks), True
    if query.time_order and kept and not query.in_document:
        s = _by_time(query, kept, list(detections or ()), frames)
        kept, sure, anchors, window = list(s.blocks), s.sure, s.anchors, s.window
        reasons += s.reasons
    if query.colour and kept:
        s = _by_colour(query, kept, frames)
        kept, sure = list(s.blocks), sure and s.sure
        reasons += s.reasons
    if query.position and kept:
        s = _by_position(query, kept, frames)
        kept, sure = list(s.blocks), sure and s.sure
        reasons += s.reasons
    return Selection(tuple(kept), tuple(reasons), sure, anchors, window)
