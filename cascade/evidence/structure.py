"""Document structure from OCR lines and layout regions: the page model every structure reader uses.

The readers are pure functions of `OcrLine`s (the `ocr` stage) and, when there are any,
`LayoutRegion`s (the `layout` stage); they work without regions, from the lines' geometry alone,
and in any script (English, Chinese ...). Every result is a `Located`: the text it found and the
boxes, in source pixels, an evidence crop is cut around. A reader that finds several plausible
results returns them all, best first: a caller that must answer abstains unless there is one, a
caller that sends crops sends them all.

    from cascade.evidence import headings, tables, paragraphs, codeblocks, spans
    headings.document_title(lines, regions)          # -> [Heading], best first
    headings.section_heading(lines, regions, number="3.2")   # or topic="ridership"
    tables.table_cell(lines, regions, "Blue", "February")    # -> [Cell]; one = sure
    paragraphs.sentence_with(lines, regions, "east entrance closed")  # -> [Located]
    codeblocks.definitions(lines, regions)           # -> [Definition]: functions, classes ...
    spans.exact_span(text, "weekday")                # -> Span | None (None: abstain)

Lines and regions of several images or video frames may be mixed: `pages` splits them by
(media index, timestamp) and each page is read on its own.
"""

from __future__ import annotations

import dataclasses
import statistics
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from cascade.artifacts import Box, LayoutRegion, OcrLine, frame_key

__all__ = [
    "Located",
    "Page",
    "pages",
    "page_skew",
    "reading_order",
    "union_box",
    "level_with",
    "row_line",
    "overlap_fraction",
    "is_cjk",
    "text_length",
    "text_size",
]


@dataclass(frozen=True)
class Located:
    """Text found on a page, with the boxes (source pixels) of what it was read from.

    kind: 'title', 'heading', 'cell', 'sentence', 'definition' ...; boxes: the answer's own box
    first, then context a crop should keep (a cell's row and column keys); score: how well it fits
    what was asked (comparable between results of one call only).
    """

    text: str
    kind: str
    boxes: tuple[Box, ...]
    media_index: int = 0
    timestamp: float | None = None
    score: float = 1.0

    @property
    def box(self) -> Box:
        """The union of `boxes`: one crop that holds the answer and its context."""
        return union_box(self.boxes)


def union_box(boxes: Iterable[Box]) -> Box:
    boxes = list(boxes)
    out = boxes[0]
    for b in boxes[1:]:
        out = out.union(b)
    return out


def level_with(
    box: Box, lines: Iterable[OcrLine], media_index: int, timestamp: float | None
) -> list[OcrLine]:
    """The lines of one image (media and time) level with `box` on its row, of a similar height
    (a receipt's key far left of its value, a table's row across its columns)."""
    return [
        ln
        for ln in lines
        if ln.media_index == media_index
        and ln.timestamp == timestamp
        and min(ln.box.y1, box.y1) - max(ln.box.y0, box.y0) >= 0.5 * min(ln.box.height, box.height)
        and ln.box.height <= 2 * box.height
    ]


def row_line(line: OcrLine, lines: Iterable[OcrLine]) -> OcrLine:
    """The row through `line` as one line: the texts level with it left to right, its box from
    the first to the last."""
    level = sorted(
        level_with(line.box, lines, line.media_index, line.timestamp), key=lambda ln: ln.box.x0
    )
    text = " ".join(ln.text for ln in level)
    box = union_box([ln.box for ln in level])
    return dataclasses.replace(line, text=text, box=box)


def overlap_fraction(inner: Box, outer: Box) -> float:
    """How much of `inner`'s area lies inside `outer` (0..1)."""
    ix = max(0.0, min(inner.x1, outer.x1) - max(inner.x0, outer.x0))
    iy = max(0.0, min(inner.y1, outer.y1) - max(inner.y0, outer.y0))
    return ix * iy / inner.area if inner.area > 0 else 0.0


def is_cjk(ch: str) -> bool:
    """A Han, kana or hangul character (scripts written without spaces between words)."""
    o = ord(ch)
    return (
        0x4E00 <= o <= 0x9FFF
        or 0x3400 <= o <= 0x4DBF
        or 0x3040 <= o <= 0x30FF
        or 0xAC00 <= o <= 0xD7AF
        or 0xF900 <= o <= 0xFAFF
        or 0x20000 <= o <= 0x2FA1F
    )


def _advance(ch: str) -> float:
    """A character's typical advance in ems: CJK and full-width 1, capitals ~0.68, other letters
    and digits ~0.55, spaces and punctuation ~0.3."""
    if is_cjk(ch) or unicodedata.east_asian_width(ch) in "FW":
        return 1.0
    if ch.isspace():
        return 0.3
    return 0.68 if ch.isupper() else 0.55 if ch.isalnum() else 0.35


def text_size(line: OcrLine) -> float:
    """The line's font size (em) in pixels, from its width per character: unlike the box's
    height it does not change with ascenders and descenders ('Council notice' vs 'gyp'). OCR boxes
    are padded by ~0.3 of their height on each side; a line of under 2 ems of text is measured by
    its height."""
    ems = sum(_advance(ch) for ch in line.text.strip())
    if ems < 2:
        return 0.7 * line.box.height
    return max(line.box.width - 0.6 * line.box.height, 0.0) / ems


def text_length(text: str, cjk_weight: float = 1.0) -> float:
    """Length in 'words': a run of letters/digits counts as one, a CJK character as `cjk_weight`
    (1: a character; 0.5 where a word is meant: a Chinese word is about two characters)."""
    n, in_word = 0.0, False
    for ch in text:
        if is_cjk(ch):
            n, in_word = n + cjk_weight, False
        elif ch.isalnum():
            n, in_word = n + (not in_word), True
        else:
            in_word = False
    return n


@dataclass(frozen=True)
class Page:
    """The lines and layout regions of one image or video frame, lines in reading order.

    A page photographed at an angle is read level: `lines` and `regions` are turned back by the
    page's `skew` (the median angle of its lines) around the middle of its text, each line's box
    the upright box of its level text. Readers measure on these and report `original(line)`'s
    box, which is where the line is in the source.
    """

    media_index: int
    timestamp: float | None
    lines: tuple[OcrLine, ...]
    regions: tuple[LayoutRegion, ...] = field(default=())
    skew: float = 0.0
    originals: dict[int, OcrLine] = field(default_factory=dict, compare=False, repr=False)

    def original(self, line: OcrLine) -> OcrLine:
        """The source line of one of `lines` (the line itself when the page is level)."""
        return self.originals.get(id(line), line)

    def source_boxes(self, lines: Iterable[OcrLine]) -> tuple[Box, ...]:
        return tuple(self.original(ln).box for ln in lines)

    def region_of(
        self, line: OcrLine, labels: Sequence[str] | None = None, min_overlap: float = 0.5
    ) -> LayoutRegion | None:
        """The layout region (of one of `labels`) holding most of the line, if it holds at least
        `min_overlap` of it."""
        best, best_frac = None, min_overlap
        for r in self.regions:
            if labels is not None and r.label not in labels:
                continue
            frac = overlap_fraction(line.box, r.box)
            if frac >= best_frac:
                best, best_frac = r, frac
        return best

    def lines_in(self, box: Box, min_overlap: float = 0.5) -> list[OcrLine]:
        return [ln for ln in self.lines if overlap_fraction(ln.box, box) >= min_overlap]

    @cached_property
    def body_size(self) -> float:
        """Typical font size of body text (`text_size`), from the lines of >= 4 words, or all."""
        if not self.lines:
            return 0.0
        long = [text_size(ln) for ln in self.lines if text_length(ln.text) >= 4]
        return statistics.median(long or [text_size(ln) for ln in self.lines])

    @cached_property
    def body_height(self) -> float:
        """Typical height of a body-text line: the median height of the longer lines (headings,
        table cells and labels are short), or of all lines when none is long."""
        if not self.lines:
            return 0.0
        lengths = sorted(text_length(ln.text) for ln in self.lines)
        cut = lengths[len(lengths) // 2]
        long = [ln.box.height for ln in self.lines if text_length(ln.text) >= max(cut, 4)]
        return statistics.median(long or [ln.box.height for ln in self.lines])


MIN_SKEW = 0.5  # degrees: pages turned less are read as they are
MAX_SKEW = 30.0  # beyond this a page is not 'at an angle' but turned: read as it is


def page_skew(lines: Sequence[OcrLine]) -> float:
    """The median baseline angle of the lines at least twice as wide as tall (a short word's
    angle is noisy), or of all lines when none is; 0 when that is under MIN_SKEW."""
    long = [ln.angle for ln in lines if ln.box.width >= 2 * ln.box.height]
    angles = long or [ln.angle for ln in lines]
    skew = statistics.median(angles) if angles else 0.0
    return skew if MIN_SKEW <= abs(skew) <= MAX_SKEW else 0.0


def _level(lines: list[OcrLine], regions: list[LayoutRegion], skew: float):
    """Lines and regions turned back by `skew` degrees around the middle of the text."""
    t = np.radians(skew)
    cos, sin = float(np.cos(t)), float(np.sin(t))
    mid = union_box(ln.box for ln in lines)
    mx, my = (mid.x0 + mid.x1) / 2, (mid.y0 + mid.y1) / 2

    def turn(x: float, y: float) -> tuple[float, float]:
        dx, dy = x - mx, y - my  # clockwise by `skew` on screen (y grows downwards)
        return mx + dx * cos - dy * sin, my + dx * sin + dy * cos

    c, s = abs(cos), abs(sin)
    det = c * c - s * s
    level_lines, originals = [], {}
    for ln in lines:
        b = ln.box  # the upright box of a w x h line turned by skew is (w c + h s) x (w s + h c)
        w = max((b.width * c - b.height * s) / det, 0.5 * b.width)
        h = max((b.height * c - b.width * s) / det, 0.25 * b.height)
        x, y = turn((b.x0 + b.x1) / 2, (b.y0 + b.y1) / 2)
        level = dataclasses.replace(
            ln, box=Box(x - w / 2, y - h / 2, x + w / 2, y + h / 2), angle=ln.angle - skew
        )
        level_lines.append(level)
        originals[id(level)] = ln
    level_regions = []
    for r in regions:
        corners = [turn(x, y) for x in (r.box.x0, r.box.x1) for y in (r.box.y0, r.box.y1)]
        xs, ys = [p[0] for p in corners], [p[1] for p in corners]
        level_regions.append(dataclasses.replace(r, box=Box(min(xs), min(ys), max(xs), max(ys))))
    return level_lines, level_regions, originals


def pages(lines: Iterable[OcrLine], regions: Iterable[LayoutRegion] = ()) -> list[Page]:
    """Split lines and regions by image / video frame; lines with text only, in reading order
    (top to bottom, then left to right within a row), a page at an angle read level."""
    groups: dict[tuple, tuple[list[OcrLine], list[LayoutRegion]]] = {}

    def group_of(media_index: int, timestamp: float | None):
        key = frame_key(media_index, timestamp)
        if key not in groups and key[1] is not None:  # same frame, neighbouring bucket
            key = next(
                (k for k in ((media_index, key[1] - 1), (media_index, key[1] + 1)) if k in groups),
                key,
            )
        return groups.setdefault(key, ([], []))

    for ln in lines:
        if ln.text.strip():
            group_of(ln.media_index, ln.timestamp)[0].append(ln)
    for r in regions:
        group_of(r.media_index, r.timestamp)[1].append(r)
    out = []
    for (media, _), (lns, regs) in groups.items():
        ts = lns[0].timestamp if lns else regs[0].timestamp
        skew = page_skew(lns)
        originals: dict[int, OcrLine] = {}
        if skew:
            lns, regs, originals = _level(lns, regs, skew)
        out.append(Page(media, ts, tuple(reading_order(lns)), tuple(regs), skew, originals))
    return sorted(out, key=lambda p: (p.media_index, p.timestamp or 0.0))


def reading_order(lines: Sequence[OcrLine]) -> list[OcrLine]:
    """Rows top to bottom (lines whose vertical spans mostly overlap share a row), left to right."""
    rows: list[list[OcrLine]] = []
    for ln in sorted(lines, key=lambda ln: (ln.box.y0 + ln.box.y1) / 2):
        row = rows[-1] if rows else None
        if row is not None and _same_row(row[0].box, ln.box):
            row.append(ln)
        else:
            rows.append([ln])
    return [ln for row in rows for ln in sorted(row, key=lambda ln: ln.box.x0)]


def _same_row(a: Box, b: Box) -> bool:
    overlap = min(a.y1, b.y1) - max(a.y0, b.y0)
    return overlap >= 0.5 * min(a.height, b.height)
