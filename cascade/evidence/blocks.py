"""Evidence from what the tools found, with no model: text blocks, salience, plausibility.

A reading question's answer is unknown text, so nothing here compares meanings. A frame or region
is worth sending for a reading question when it holds *salient text*: confident, not a lone glyph,
not a box the size of the frame, laid out like a sign (a short block of adjacent lines). Lines that
sit next to each other are one block (a two-line sign, a key and its value on one row), so a crop
or an answer never keeps half of it. (The question's cues and what they match: `query.has_cue`.)
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from cascade.artifacts import Box, Detection, Image, OcrLine, frame_key, same_time

__all__ = [
    "ByFrame",
    "TextBlock",
    "text_blocks",
    "salience",
    "implausible",
    "frame_size_of",
    "named_detections",
    "norm_text",
    "reading_chars",
]


def norm_text(text: str) -> str:
    """Upper-case letters and digits only: how texts are compared for identity."""
    return re.sub(r"[\W_]+", "", text.upper())


@dataclass(frozen=True)
class TextBlock:
    """Adjacent OCR lines of one frame/image read as one unit, in reading order."""

    lines: tuple[OcrLine, ...]
    box: Box

    @property
    def text(self) -> str:
        return " ".join(line.text.strip() for line in self.lines if line.text.strip())

    @property
    def confidence(self) -> float:
        return min(line.confidence for line in self.lines)

    @property
    def line_height(self) -> float:
        return min(line.box.height for line in self.lines)

    @property
    def media_index(self) -> int:
        return self.lines[0].media_index

    @property
    def timestamp(self) -> float | None:
        return self.lines[0].timestamp


def _adjacent(a: Box, b: Box) -> bool:
    """Same row with a word gap, or stacked lines of a similar print size with a line gap."""
    h = min(a.height, b.height)
    v_overlap = min(a.y1, b.y1) - max(a.y0, b.y0)
    h_gap = max(a.x0, b.x0) - min(a.x1, b.x1)
    if v_overlap >= 0.5 * h:
        return h_gap <= 1.5 * h
    if max(a.height, b.height) > 1.6 * h:
        return False  # print this much larger is another text: a caption above a small plate
    v_gap = max(a.y0, b.y0) - min(a.y1, b.y1)
    h_overlap = min(a.x1, b.x1) - max(a.x0, b.x0)
    return v_gap <= 0.8 * h and h_overlap >= 0.3 * min(a.width, b.width)


class ByFrame:
    """Images bucketed by (media, frame time), so finding the image a finding belongs to costs
    the same for 4 frames as for an hour of them (a linear scan per finding made per-question
    work grow with the square of the video's length)."""

    def __init__(self, images: list[Image] | None):
        self.images = list(images or ())
        self._timed: dict[tuple, list[int]] = {}
        self._media: dict[int, list[int]] = {}
        for i, im in enumerate(self.images):
            self._media.setdefault(im.media_index, []).append(i)
            self._timed.setdefault(
                frame_key(im.media_index, getattr(im, "timestamp", None)), []
            ).append(i)

    def of(self, media_index: int, timestamp: float | None) -> list[int]:
        """Indices (in order) of the images that are `is_from(media_index, timestamp)`."""
        if timestamp is None:
            return self._media.get(media_index, [])
        m, k = frame_key(media_index, timestamp)
        assert k is not None  # a timestamp always has a bucket
        near = self._timed.get((m, None), []) + [
            i for d in (-1, 0, 1) for i in self._timed.get((m, k + d), [])
        ]
        return sorted(i for i in near if self.images[i].is_from(media_index, timestamp))

    def owner(self, box: Box, media_index: int, timestamp: float | None) -> int | None:
        """Index of the image a box belongs to: same media (and frame time), largest overlap."""
        best, best_area = None, 0.0
        for i in self.of(media_index, timestamp):
            b = self.images[i].box
            ix = max(0.0, min(b.x1, box.x1) - max(b.x0, box.x0))
            iy = max(0.0, min(b.y1, box.y1) - max(b.y0, box.y0))
            if ix * iy > best_area:
                best, best_area = i, ix * iy
        return best

    def source_size(self, media_index: int, timestamp: float | None) -> tuple[int, int] | None:
        """(width, height) of the source of the image a finding belongs to, if known."""
        found = self.of(media_index, timestamp)
        return self.images[found[0]].source_size if found else None


def text_blocks(lines: list[OcrLine]) -> list[TextBlock]:
    """Group lines into blocks: per frame/image, lines chained by adjacency (`_adjacent`)."""
    frames: dict[tuple, list[list[OcrLine]]] = {}  # only lines of one frame can chain
    for line in lines:
        if not line.text.strip():
            continue
        groups = frames.setdefault(frame_key(line.media_index, line.timestamp), [])
        joined = [
            g
            for g in groups
            if same_time(g[0].timestamp, line.timestamp)
            and any(_adjacent(line.box, o.box) for o in g)
        ]
        merged = [line] + [o for g in joined for o in g]
        groups[:] = [g for g in groups if not any(g is j for j in joined)] + [merged]
    blocks = []
    for g in (g for groups in frames.values() for g in groups):
        g.sort(key=lambda ln: (round(ln.box.y0 / max(ln.box.height, 1)), ln.box.x0))
        box = g[0].box
        for line in g[1:]:
            box = box.union(line.box)
        blocks.append(TextBlock(tuple(g), box))
    return sorted(blocks, key=lambda b: (b.media_index, b.timestamp or 0.0, b.box.y0, b.box.x0))


def frame_size_of(
    images: list[Image] | ByFrame | None, media_index: int, timestamp: float | None
) -> tuple[int, int] | None:
    """(width, height) of the source of the image a finding belongs to, if known."""
    lookup = images if isinstance(images, ByFrame) else ByFrame(images)
    return lookup.source_size(media_index, timestamp)


def _alnum(text: str) -> int:
    return sum(ch.isalnum() for ch in text)


def _han(text: str) -> int:
    return sum("\u4e00" <= ch <= "\u9fff" for ch in text)


def reading_chars(text: str) -> int:
    """How much there is to read: letters and digits, a Chinese character counting two (one
    carries about what a short Latin word does)."""
    return _alnum(text) + _han(text)


def _latin_share(text: str) -> float:
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return 1.0
    return sum("LATIN" in unicodedata.name(ch, "") for ch in letters) / len(letters)


def implausible(
    block: TextBlock,
    language: str,
    frame: tuple[int, int] | None,
    min_confidence: float = 0.8,
    min_chars: int = 2,
) -> str | None:
    """Why `block` cannot be an answer read off the image, or None when it can: too short, a
    script other than the question's (`language` 'en': Latin only; 'zh': Chinese or Latin), a
    box covering (nearly) the whole frame, low confidence."""
    chars = _alnum(block.text)
    if chars < min_chars:
        return f"'{block.text}' has {chars} letter(s)/digit(s) < {min_chars}"
    if language == "en" and _latin_share(block.text) < 0.9:
        return f"'{block.text}' is not in the question's (Latin) script"
    if frame is not None:
        w, h = frame
        if block.box.width >= 0.9 * w or block.box.area >= 0.5 * w * h:
            return f"'{block.text}' spans the whole frame"
    if block.confidence < min_confidence:
        return f"'{block.text}' read with confidence {block.confidence:.2f} < {min_confidence}"
    return None


def salience(block: TextBlock, frame: tuple[int, int] | None, language: str = "en") -> float:
    """How much a block looks like readable text worth sending, in [0, 1]: recognition confidence,
    times how much there is to read (`reading_chars`, saturating at 4), times its layout (short
    blocks of a few lines score full; a box spanning the frame or a long paragraph scores low).
    A couple of glyphs of a script the question is not in are mostly texture misread as text
    (Chinese text is read for a Chinese question)."""
    chars = reading_chars(block.text)
    if chars < 2:
        return 0.0
    score = block.confidence * min(1.0, chars / 4)
    native = _latin_share(block.text) >= 0.5 or (language == "zh" and _han(block.text) >= 2)
    if not native and _alnum(block.text) < 4:
        score *= 0.3
    if frame is not None:
        w, h = frame
        if block.box.width >= 0.9 * w or block.box.area >= 0.5 * w * h:
            score *= 0.1
    if len(block.lines) > 4 or chars > 60:
        score *= 0.5  # a paragraph, not a sign
    return float(score)


def named_detections(detections: list[Detection], label: str | None) -> list[Detection]:
    """Detections of `label` (all of them when no label is named)."""
    return [d for d in detections if label is None or d.label == label]
