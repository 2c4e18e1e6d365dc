"""The judges of `cascade bench`: real OCR and a real detector, and how their reads are compared
with a gold span.

Two comparisons, on purpose different:
- `normalize` (evidence recall): is the gold readable in what OCR read? Letters and digits of any
  script only, case folded, full-width forms folded (NFKC), spaces and punctuation dropped; OCR
  splits and joins lines and words unpredictably, and Chinese has no spaces to split on, so the
  gold is searched as a run of characters in the joined reads.
- `same_span` (tool answers): is the answer the span itself? Equal after NFKC, case folding,
  removing whitespace and the punctuation / currency signs around it, nothing else: "Tuesday" for
  "Tuesday", not the sentence holding it; "$12.50" for "12.50", not "1250".
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import numpy as np

from ..artifacts import Image
from .items import EvalItem

_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2212\uff0d"), "-")


def normalize(text: str) -> str:
    """Letters and digits of any script, upper case, NFKC: what evidence recall compares."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).upper() if ch.isalnum())


def _edge(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "PSZ"  # punctuation, symbols ($ ¥ €), separators


def same_span(answer: str, gold: str) -> bool:
    """Is `answer` exactly the gold span (up to case, width, spaces and the punctuation or
    currency sign around it)?"""

    def canon(text: str) -> str:
        text = unicodedata.normalize("NFKC", text).translate(_DASHES).casefold()
        text = "".join(text.split())
        start, end = 0, len(text)
        while start < end and _edge(text[start]):
            start += 1
        while end > start and _edge(text[end - 1]):
            end -= 1
        return text[start:end]

    return bool(canon(gold)) and canon(answer) == canon(gold)


def sent_size(family, image: Image) -> tuple[int, int]:
    """(width, height) the model's processor resizes `image` to before the vision tower."""
    h, w = family.resized(image.width, image.height)
    return w, h


@dataclass
class Readers:
    """Real OCR and detector, loaded once: the judges. The text detector's recall depends on its
    input scale (a sign one scale misses, another finds), so the judge reads at several. Those
    scales only shrink, so an image smaller than all of them (a crop) would get one look; it
    also gets its detector's view enlarged to `small_side` (short side). Either way the
    recogniser reads the pixels as given: the detector only says where the text is (its boxes
    are mapped back), and where a box falls decides how the recogniser sees a glyph (at one box
    a legible 'O' reads '0', a '6' 'G')."""

    det_sides: tuple[int, ...] = (960, 2048, 1280)
    small_side: int = 320
    model: str | None = None  # the VLM checkpoint whose resizing "the size sent" means

    def __post_init__(self):
        from ..registry import get_stage_class
        from ..vlm import build_tiny_vlm
        from ..vlm.families import ImageLimits, load_family

        model = self.model or str(build_tiny_vlm(size="test"))
        self.vlm = load_family(model, ImageLimits())
        self.full_res = load_family(model, ImageLimits(resolution="full"))

        self.ocrs = [
            get_stage_class("ocr")({"det_limit_side_len": s, "min_confidence": 0.3})
            for s in self.det_sides
        ]
        self.small_ocr = get_stage_class("ocr")(
            {"det_limit_side_len": self.small_side, "det_limit_type": "min", "min_confidence": 0.3}
        )
        self.detect = get_stage_class("detect")()

    def texts(self, image: Image, family=None):
        """What OCR reads in `image` resized as the VLM gets it, on a plain margin (the detector
        needs a few pixels around text; a uniform border adds no information), per scale."""
        if family is not None:
            image = image.resized(*sent_size(family, image))
        px = image.pixels
        border = np.median(np.concatenate([px[0], px[-1], px[:, 0], px[:, -1]]), axis=0)
        padded = np.empty((px.shape[0] + 32, px.shape[1] + 32, 3), np.uint8)
        padded[:] = border.astype(np.uint8)
        padded[16:-16, 16:-16] = px
        seen = set()
        for side, ocr in zip(self.det_sides, self.ocrs, strict=False):
            # the detector only shrinks ("max"): every scale over the image's longest side reads
            # it at its own size, so once is enough
            if (at := min(side, max(padded.shape[:2]))) not in seen:
                seen.add(at)
                yield " ".join(line.text for line in ocr(images=[Image(padded)]).lines)
        if min(padded.shape[:2]) < self.small_side:
            yield " ".join(line.text for line in self.small_ocr(images=[Image(padded)]).lines)

    def reads(self, images: list[Image], gold: str, family=None) -> bool:
        """Is `gold` readable in one of `images`?"""
        want = normalize(gold)
        return bool(want) and any(
            want in normalize(text) for im in images for text in self.texts(im, family)
        )

    def count(self, images: list[Image], label: str = "person") -> int:
        counts = [self.detect(images=[im]).counts.get(label, 0) for im in images]
        return max(counts, default=0)


def answer_frames(item: EvalItem) -> list[Image]:
    """Full-resolution images that hold the answer (the middle gold frame for a video)."""
    if item.media_kind != "video":
        return [Image.open(item.media[i], media_index=i) for i in item.frames]
    from ..media import VideoSource

    mid = item.times[len(item.times) // 2]
    return list(VideoSource(item.media[0]).fetch([mid]).values())


def oracle_needs_high_res(item: EvalItem, readers: Readers, thumb: int = 224) -> bool | None:
    """Is the answer lost on a thumbnail? Decided by the real OCR / detector, not by us. None for
    documents (doc_qa has no resolution router) and for questions with no answer frame."""
    if item.media_kind == "document":
        return None
    if item.kind == "scene":
        return False
    if not (item.frames or item.times):
        return None
    from ..stages.resize import fit_longest_side

    thumbs = [fit_longest_side(im, thumb) for im in answer_frames(item)]
    if item.kind in ("read", "doc"):
        return not readers.reads(thumbs, item.answer)
    return readers.count(thumbs, item.label or "person") != int(item.answer)


def evidence_order(item: EvalItem, images: list[Image]) -> list[Image]:
    """Images that show the answer's frame first (judging stops at the first that reads it)."""

    def first(im: Image) -> bool:
        t = getattr(im, "timestamp", None)
        if item.media_kind == "video" and t is not None and item.times:
            return min(item.times) - 0.05 <= t <= max(item.times) + 0.05
        return im.media_index in item.frames

    return sorted(images, key=lambda im: not first(im))
