"""Guide the `tower` reduction by the evidence the cascade found, or refuse it for a reading
question that has none.

`tower` drops merge units before the vision tower. Unguided, it keeps one unit per cell, the one
whose pixels vary most: text is exactly what that cuts apart (one 28-px block of a word kept, its
neighbours dropped). So `vlm_answer` hands it the boxes the stages found, per image in that
image's own pixels (`KeepRegions`): the text lines, detections and layout regions on it, those
that match the question's target first (a line holding a word that names it, a detection of the
label it names), then the lines on their rows and the lines holding a span of the answer's type. Without evidence on some image, a reading question (its target is text on the
media) gets no `tower` at all: every visual token is kept, and the route says why. Any other
question gets the unguided rule, and the route says that too.
"""
from __future__ import annotations

import dataclasses

from cascade.artifacts import Box, Detection, Image, LayoutRegion, OcrLine, Route
from cascade.evidence.codeblocks import definition_in
from cascade.evidence.query import Query, cue_tokens, has_cue, singular
from cascade.evidence.spans import candidates
from cascade.vlm.reduction import KeepRegions, ReductionConfig

__all__ = ["guide_tower", "image_regions"]

Found = OcrLine | Detection | LayoutRegion
# answer types that are a typed span inside a line (`cascade.evidence.spans`)
_SPAN_KINDS = frozenset({"day", "date", "time", "when", "amount", "id", "identifier", "number"})
_KIND_NAME = {OcrLine: "text line", Detection: "detection", LayoutRegion: "layout region"}


def _target_words(query: Query) -> set[str]:
    """The words that name the target: the question's cues and its typed keys (the key of a
    key-value, a table's row and column keys, a section's name or number)."""
    named = (query.key, query.key_noun, query.row_key, query.column_key, query.section_name,
             query.section_number)
    return set(query.cues) | cue_tokens(" ".join(v for v in named if v))


def _matches(item: Found, query: Query) -> bool:
    """The item is the question's target: a line with one of its words (for a code identifier: a
    line of code that defines one), a detection of its label."""
    if isinstance(item, OcrLine):
        if query.target == "code_identifier" and definition_in(item.text) is not None:
            return True
        return has_cue(item.text, _target_words(query))
    if isinstance(item, Detection):
        return query.label is not None and singular(item.label.lower()) == singular(query.label.lower())
    return False


def _same_row(a: Box, b: Box) -> bool:
    """The boxes share a text row: they overlap vertically by half the lower one's height."""
    overlap = min(a.y1, b.y1) - max(a.y0, b.y0)
    return overlap > 0.5 * min(a.height, b.height)


def _rank(item: Found, box: Box, query: Query, targets: list[Box]) -> int:
    """0: the target (a line naming it, a detection of its label); 1: a text line on a target
    line's row (a key's value, a row key's cells); 2: a line holding a span of the answer's type
    (an amount, a time, an id ...); 3: other text lines; 4: detections; 5: layout regions."""
    if _matches(item, query):
        return 0
    if not isinstance(item, OcrLine):
        return 4 if isinstance(item, Detection) else 5
    if any(_same_row(box, t) for t in targets):
        return 1
    if query.answer_type in _SPAN_KINDS and candidates(item.text, query.answer_type):
        return 2
    return 3


def image_regions(image: Image, query: Query, found: list[Found]) -> tuple[KeepRegions | None, list[Found]]:
    """The boxes of `found` on `image` in its own pixels, most needed first (`_rank`, then top to
    bottom): (KeepRegions or None when none falls on it, the items used)."""
    mine = []
    for item in found:
        if not (image.is_from(item.media_index, item.timestamp) and image.box.intersects(item.box)):
            continue
        local = image.from_source(item.box).clip(image.width, image.height)
        if local.width > 0 and local.height > 0:
            mine.append((item, local))
    if not mine:
        return None, []
    targets = [b for item, b in mine if _matches(item, query)]
    mine.sort(key=lambda p: (_rank(p[0], p[1], query, targets), p[1].y0, p[1].x0))
    boxes = tuple(_rounded(b) for _, b in mine)
    return KeepRegions((image.width, image.height), boxes), [item for item, _ in mine]


def _rounded(box: Box) -> tuple[float, float, float, float]:
    # a stable identity for the prefix cache: the same evidence through another crop's float
    # scale must not make another key; 1/100 px moves no unit boundary
    return tuple(round(v, 2) for v in box.as_tuple())


def guide_tower(red: ReductionConfig, images: list[Image], query: Query, found: list[Found]
                ) -> tuple[ReductionConfig, Route]:
    """The reduction to apply instead of `red` (a `tower` selection) and the route that says how."""
    per_image, used = [], []
    for im in images:
        regions, items = image_regions(im, query, found)
        per_image.append(regions)
        used += items
    blind = [i for i, r in enumerate(per_image) if r is None]
    if blind and query.reads_text:
        return ReductionConfig(), Route(
            "tower_not_applied",
            f"reading question ({query.target}) and no evidence found on image(s) "
            f"{', '.join(map(str, blind))}: the unguided tower reduction would cut text apart, so "
            "every visual token is kept", {"keep_ratio": 1.0})
    counts: dict[str, int] = {}
    for item in used:
        counts[_KIND_NAME[type(item)]] = counts.get(_KIND_NAME[type(item)], 0) + 1
    targets = sum(_matches(item, query) for item in used)
    guided = ", ".join(f"{n} {kind}(s)" for kind, n in counts.items())
    if blind and len(blind) == len(images):
        reason = (f"no evidence found on the {len(images)} image(s): keep {red.keep_ratio:g}, one "
                  "merge unit per cell, the one whose pixels vary most")
        branch = "tower_unguided"
    else:
        reason = (f"keep {red.keep_ratio:g}: the merge units under {guided} ({targets} matching the "
                  "question's target first) and one unit around them, then the most varied unit of "
                  "each cell they leave empty"
                  + (f"; no evidence on image(s) {', '.join(map(str, blind))}: variance only"
                     if blind else ""))
        branch = "tower_guided"
    scores = {"keep_ratio": float(red.keep_ratio), "evidence_boxes": float(len(used)),
              "target_boxes": float(targets)}
    keep = None if len(blind) == len(images) else tuple(per_image)
    return dataclasses.replace(red, keep_regions=keep), Route(branch, reason, scores)
