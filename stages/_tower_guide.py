"""Guide the `tower` reduction by the evidence the cascade found, or refuse it for a reading
question that has none.

`tower` drops merge units before the vision tower. Unguided, it keeps one unit per cell, the one
whose pixels vary most: text is exactly what that cuts apart (one 28-px block of a word kept, its
neighbours dropped). So `vlm_answer` hands it the boxes the stages found, per image in that
image's own pixels (`KeepRegions`): the text lines, detections and layout regions on it, those
that name the question's target best first (the lines holding most of its words: of a table's
row keys 'Bus 12' ... 'Bus 16', the one the question names; the key's line before a line that
only names the document; a line of code that defines an identifier; a detection of the label it
names), then the lines on their rows (kept with their margins before any other box:
`KeepRegions.lead`), then lines that name it less well and the lines holding a span of the
answer's type. Without evidence on some image, a reading question
(its target is text on the media) gets no `tower` at all: every visual token is kept, and the
route says why. Any other question gets the unguided rule, and the route says that too.
"""

from __future__ import annotations

import dataclasses
import math

from cascade.artifacts import Box, Detection, Image, LayoutRegion, OcrLine, Route
from cascade.evidence.codeblocks import defined, definitions
from cascade.evidence.documents import located_for
from cascade.evidence.query import Query, cue_tokens, singular
from cascade.evidence.spans import candidates
from cascade.vlm.reduction import KeepRegions, ReductionConfig
from cascade.vlm.reduction.tower import box_units

__all__ = ["guide_tower", "image_regions"]

Found = OcrLine | Detection | LayoutRegion
# answer types that are a typed span inside a line (`cascade.evidence.spans`)
_SPAN_KINDS = frozenset({"day", "date", "time", "when", "amount", "id", "identifier", "number"})
_KIND_NAME = {OcrLine: "text line", Detection: "detection", LayoutRegion: "layout region"}
# The side of one merge unit in the pixels of an image as sent: Qwen2/2.5-VL's 14-px patches
# merged 2x2. `select_tiles` cuts every crop to a size the processor keeps, so a crop's units are
# its pixels / 28 (a family with other units only makes this share an estimate).
_UNIT_PX = 28


def _target_words(query: Query) -> tuple[set[str], set[str]]:
    """(the words that name the target: the question's cues and its typed keys (the key of a
    key-value, a table's row and column keys, a section's name or number); the words that only
    name the document it is on: a key-value's noun, the 'invoice' of 'the total on this
    invoice')."""
    named = cue_tokens(
        " ".join(
            v
            for v in (
                query.key,
                query.row_key,
                query.column_key,
                query.section_name,
                query.section_number,
            )
            if v
        )
    )
    # the noun stays the document's name when the question's cues hold it too
    noun = cue_tokens(query.key_noun or "") - named
    return (set(query.cues) | named) - noun, noun


def _strength(item: Found, query: Query, defining: set[int]) -> int:
    """How well the item names the question's target: for a text line two points per word of the
    target it holds (a table's row key 'Bus 16' names it better than every other 'Bus ..' does)
    and one per word of the document's name (a page's title 'EXPENSE CLAIM' names the document,
    not the field asked about), two more when it is a line of code that defines an identifier
    and the question asks for one; for a detection 1 when its label is the one asked about. 0:
    not the target."""
    if isinstance(item, OcrLine):
        words, noun = _target_words(query)
        held = cue_tokens(item.text)
        return (
            2 * len(words & held)
            + len(noun & held)
            + 2 * (query.target == "code_identifier" and id(item) in defining)
        )
    if isinstance(item, Detection):
        return int(
            query.label is not None
            and singular(item.label.lower()) == singular(query.label.lower())
        )
    return 0


def _defining(found: list[Found], kind: str | None) -> set[int]:
    """ids of the text lines that define an identifier of the kind asked for (a function, a
    class ...; any kind when none of it is found), read as the code reader reads them (a page of
    code says C-style signatures without a '{' are definitions; a line number in the margin and
    a line OCR read in pieces are handled there)."""
    lines = [item for item in found if isinstance(item, OcrLine)]
    by_box: dict[tuple, list[int]] = {}
    for ln in lines:
        by_box.setdefault((ln.media_index, ln.timestamp, ln.box), []).append(id(ln))
    out: set[int] = set()
    for d in defined(lines, kind=kind) or definitions(lines):
        for box in d.boxes:
            out.update(by_box.get((d.media_index, d.timestamp, box), ()))
    return out


def _same_row(a: Box, b: Box) -> bool:
    """The boxes share a text row: they overlap vertically by half the lower one's height."""
    overlap = min(a.y1, b.y1) - max(a.y0, b.y0)
    return overlap > 0.5 * min(a.height, b.height)


def _rank(item: Found, box: Box, strength: int, best: int, query: Query, targets: list[Box]) -> int:
    """0: the target (the items that name it best: a line with most of its words, a defining line
    of code, a detection of its label); 1: a text line on a target line's row (a key's value, a
    row key's cells); 2: a line that names it less well (one word of several); 3: a line holding
    a span of the answer's type (an amount, a time, an id ...); 4: other text lines; 5:
    detections; 6: layout regions."""
    if strength and (strength == best or isinstance(item, Detection)):
        return 0
    if not isinstance(item, OcrLine):
        return 5 if isinstance(item, Detection) else 6
    if any(_same_row(box, t) for t in targets):
        return 1
    if strength:
        return 2
    if query.answer_type in _SPAN_KINDS and candidates(item.text, query.answer_type):
        return 3
    return 4


def image_regions(
    image: Image, query: Query, found: list[Found]
) -> tuple[KeepRegions | None, list[Found]]:
    """The boxes of `found` on `image` in its own pixels, most needed first (`_rank`, then top to
    bottom): (KeepRegions or None when none falls on it, the items used). The target and the
    lines on its row lead (`KeepRegions.lead`): the selection keeps them with their margin before
    any other box."""
    regions, ranked = _image_ranked(image, query, found)
    return regions, list(
        {id(item): item for _, item, _ in ranked}.values()
    )  # a line once, spans or not


def _image_ranked(
    image: Image, query: Query, found: list[Found]
) -> tuple[KeepRegions | None, list[tuple[int, Found, Box]]]:
    mine = []
    for item in found:
        if not (image.is_from(item.media_index, item.timestamp) and image.box.intersects(item.box)):
            continue
        local = image.from_source(item.box).clip(image.width, image.height)
        if local.width > 0 and local.height > 0:
            mine.append((item, local))
    if not mine:
        return None, []
    ranked = _ranked(mine, query)
    lead = sum(rank <= 1 for rank, _, _ in ranked)  # the answer's spans, the target, its rows
    boxes = tuple(_rounded(b) for _, _, b in ranked)
    return KeepRegions((image.width, image.height), boxes, lead), ranked


def _located(mine: list[tuple[Found, Box]], query: Query) -> dict[int, list[str]]:
    """The text lines the document readers (`located_for`: the title, the section heading by
    number or topic, the cell, the defining line of code ...) name as the target: {id(line): the
    answers read in it}. Words alone miss them: "the fourth section" names "IV. Warranty Terms"
    by its numeral, not by a word it holds."""
    if not query.in_document:
        return {}
    lines = [item for item, _ in mine if isinstance(item, OcrLine)]
    regions = [item for item, _ in mine if isinstance(item, LayoutRegion)]
    by_box: dict[tuple, list[OcrLine]] = {}
    for ln in lines:
        by_box.setdefault((ln.media_index, ln.timestamp, ln.box), []).append(ln)
    out: dict[int, list[str]] = {}
    for found in located_for(query, lines, regions)[0]:
        for box in found.boxes:
            for ln in by_box.get((found.media_index, found.timestamp, box), ()):
                out.setdefault(id(ln), []).append(found.text)
    return out


def _span_boxes(line: OcrLine, box: Box, answers: list[str], query: Query) -> list[Box]:
    """Where in `box` (the line's) the answer's own characters lie: the answers the readers read
    in it, else the spans of the answer's type it holds, placed by their share of the line's
    characters with one character of slack. Kept before the whole line, so a line too long for
    the budget still gives its answer (a code line's function name, a total's amount)."""
    text = line.text
    spans = [(at, at + len(a)) for a in answers if a and a != text and (at := text.find(a)) >= 0]
    if not spans and query.answer_type in _SPAN_KINDS:
        spans = [(s.start, s.end) for s in candidates(text, query.answer_type)]
    per_char = box.width / max(len(text), 1)
    return [
        Box(
            box.x0 + max(0, start - 1) * per_char,
            box.y0,
            box.x0 + min(len(text), end + 1) * per_char,
            box.y1,
        )
        for start, end in spans
    ]


def _ranked(mine: list[tuple[Found, Box]], query: Query) -> list[tuple[int, Found, Box]]:
    """(rank, item, box) most needed first: by `_rank` (-1: the answer's own characters inside a
    target line), then top to bottom, left to right."""
    defining = (
        _defining([item for item, _ in mine], query.code_kind)
        if query.target == "code_identifier"
        else set()
    )
    located = _located(mine, query)
    strength = [_strength(item, query, defining) for item, _ in mine]
    best = max(strength)
    # a line the readers located is the target, however few of the question's words it holds
    strength = [
        best + 1 if id(item) in located else s for (item, _), s in zip(mine, strength, strict=True)
    ]
    best = max(strength)
    targets = [
        b
        for (item, b), s in zip(mine, strength, strict=True)
        if s and s == best and isinstance(item, OcrLine)
    ]
    out = [
        (_rank(item, b, s, best, query, targets), item, b)
        for (item, b), s in zip(mine, strength, strict=True)
        # a table model's cells are read above (`_located`), not kept as boxes: their table is
        if not (isinstance(item, LayoutRegion) and item.cell is not None)
    ]
    out += [
        (-1, item, sub)
        for rank, item, b in out
        if rank == 0 and isinstance(item, OcrLine)
        for sub in _span_boxes(item, b, located.get(id(item), []), query)
    ]
    out.sort(key=lambda p: (p[0], p[2].y0, p[2].x0))
    return out


def _rounded(box: Box) -> tuple[float, float, float, float]:
    # a stable identity for the prefix cache: the same evidence through another crop's float
    # scale must not make another key; 1/100 px moves no unit boundary
    x0, y0, x1, y1 = (round(v, 2) for v in box.as_tuple())
    return x0, y0, x1, y1


def _evidence_ratio(regions: KeepRegions) -> float:
    """The keep ratio at which `tower` keeps every evidence box's own units and the leading
    boxes' margins (`tower_select`'s budget is one unit per cell of a
    round(h*sqrt(r)) x round(w*sqrt(r)) grid)."""
    w, h = regions.size
    rows, cols = max(1, math.ceil(h / _UNIT_PX)), max(1, math.ceil(w / _UNIT_PX))
    units: set[tuple[int, int]] = set()
    for i, box in enumerate(regions.boxes):
        if box[2] <= box[0] or box[3] <= box[1]:
            continue
        r0, r1, c0, c1 = box_units(box, regions.size, (rows, cols), 1 if i < regions.lead else 0)
        units.update((r, c) for r in range(r0, r1) for c in range(c0, c1))
    ratio = len(units) / (rows * cols)
    while ratio < 1 and round(rows * ratio**0.5) * round(cols * ratio**0.5) < len(units):
        ratio = min(1.0, ratio + 0.01)
    return ratio


def guide_tower(
    red: ReductionConfig, images: list[Image], query: Query, found: list[Found]
) -> tuple[ReductionConfig, Route]:
    """The reduction to apply instead of `red` (a `tower` selection) and the route that says how.
    The evidence is always kept: where its units (and the target's margins) need more than
    `red.keep_ratio`, the ratio is raised to what they need, and the route says so."""
    per_image, used, targets = [], [], 0
    for im in images:
        regions, ranked = _image_ranked(im, query, found)
        per_image.append(regions)
        used += list({id(item): item for _, item, _ in ranked}.values())
        targets += sum(rank == 0 for rank, _, _ in ranked)  # lines, not their spans
    blind = [i for i, r in enumerate(per_image) if r is None]
    if blind and query.reads_text:
        return ReductionConfig(), Route(
            "tower_not_applied",
            f"reading question ({query.target}) and no evidence found on image(s) "
            f"{', '.join(map(str, blind))}: the unguided tower reduction would cut text apart, so "
            "every visual token is kept",
            {"keep_ratio": 1.0},
        )
    counts: dict[str, int] = {}
    for item in used:
        counts[_KIND_NAME[type(item)]] = counts.get(_KIND_NAME[type(item)], 0) + 1
    guided = ", ".join(f"{n} {kind}(s)" for kind, n in counts.items())
    if blind and len(blind) == len(images):
        reason = (
            f"no evidence found on the {len(images)} image(s): keep {red.keep_ratio:g}, one "
            "merge unit per cell, the one whose pixels vary most"
        )
        branch = "tower_unguided"
    else:
        reason = (
            f"keep {red.keep_ratio:g}: the merge units under {guided}, box by box while the "
            f"budget holds: first the {targets} naming the question's target best and the "
            "lines on their rows, then one unit around them, then the others, then one unit "
            "around those, then the most varied unit of each cell they leave empty, scattered "
            "units at most a tenth of the image: the rest grows the kept evidence outward"
            + (
                f"; no evidence on image(s) {', '.join(map(str, blind))}: variance only"
                if blind
                else ""
            )
        )
        branch = "tower_guided"
    needed = max((_evidence_ratio(r) for r in per_image if r is not None), default=0.0)
    if needed > red.keep_ratio:  # the ratio is a ceiling for the rest, never for the evidence
        reason += (
            f"; keep ratio raised from {red.keep_ratio:g} to {needed:.2f}: every evidence unit "
            f"is kept ({red.keep_ratio:g} would drop some)"
        )
        red = dataclasses.replace(red, keep_ratio=round(needed, 2))
    scores = {
        "keep_ratio": float(red.keep_ratio),
        "evidence_boxes": float(len(used)),
        "target_boxes": float(targets),
        "lead_boxes": float(sum(r.lead for r in per_image if r is not None)),
    }
    keep = None if len(blind) == len(images) else tuple(per_image)
    return dataclasses.replace(red, keep_regions=keep), Route(branch, reason, scores)
