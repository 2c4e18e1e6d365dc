"""Rows as evidence units: a key with what is printed level with it.

A receipt prints an item's name far left of its price, a form its label far left of its value,
and OCR reads stacked names or labels as one block without them. A row here runs from a line to
every text level with it (`structure.row_line`). A row is a place the answer may be (plausible)
when its key line holds a word of the question, when its text means what the question asks most
(by the sentence embedder), or when it holds a value of the kind the answer is (a date for "when
was this bought") and the page has few such values or the row means the question. Other rows
are not units: across a page of running text every line has others level with it. A row means
the question as much as its whole text or its key alone (before its colon, or its leftmost line
holding no figure): a short label's meaning drowns in a long row's.

A line with nothing level with it is a unit only when it means the question most, and then with
the lines right above and under it: what a description or a comment explains is printed next to
it (a function's signature over its description, a config key under its comment, a form's value
under its label), and the text a question paraphrases is seldom the answer itself. Where no
reader found the one place on a document, the TOP_K rows meaning the question most are leads
(`lead`), even when none stands out."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cascade.artifacts import Box, OcrLine

from .documents import SPAN_KINDS
from .query import Query, has_cue
from .spans import candidates
from .structure import level_with, row_line, union_box
from .textmatch import digit_runs

__all__ = ["RowUnit", "row_units"]

VALUE_ANSWERS = frozenset({"day", "date", "time", "when", "amount", "id"})
FEW_VALUES = 3  # at most this many rows holding the kind of value asked: all are plausible
TOP_MARGIN = 0.05  # rows within this of the best meaning are the rows it means most
MEANT = 0.5  # ... when the best is this relevant at least (0..1 over the page's typical text)
TYPED_MEANT = 0.5  # a row holding the kind of value asked, among many, that means this much
# where no reader found the one place: the rows meaning the question most, this many, that mean
# it at least this much, are leads even when none stands out (recall first)
TOP_K, RANKED_MEANT = 3, 0.2


@dataclass(frozen=True)
class RowUnit:
    """One row where the answer may be: its text and box as one line, its smallest line's
    height, its relevance to the question (0..1), whether its key holds a word of the question
    and whether it holds a value of the kind asked."""

    row: OcrLine
    line_height: float
    relevance: float
    cued: bool
    typed: bool  # it holds a value of the kind the answer is
    parts: tuple[Box, ...]  # the boxes of the lines it is made of, left to right
    lead: bool = False  # a place only as one of the TOP_K rows meaning the question most


def row_units(
    query: Query,
    lines: Sequence[OcrLine],
    relevance: Callable[[list[OcrLine]], list[float]],
    by_kind: bool = True,
) -> list[RowUnit]:
    """The rows of `lines`, each scored by `relevance` (0..1, one per row), that are places the
    answer may be (the module docstring). `by_kind=False`: another reader already found where
    the answer is (the key it names): holding the kind of value asked makes no row a place, and
    no row is a lead."""
    kind = SPAN_KINDS[query.answer_type] if query.answer_type in VALUE_ANSWERS else None
    if kind in ("weekday", "date", "time"):  # a till prints the time with the date, and OCR
        kind = "when"  # may read them as one word ('02.03.2015:59'): a row holding either
    rows: dict[tuple, tuple[OcrLine, list[OcrLine], bool]] = {}
    for ln in lines:
        row = row_line(ln, lines)
        typed = kind is not None and bool(candidates(row.text, kind))
        _, keys, _ = rows.setdefault(row.box.as_tuple(), (row, [], typed))
        keys.append(ln)
    if not rows:
        return []
    found = list(rows.values())
    # a row means the question as much as its whole text or its key alone ('Weight' of 'Weight
    # 3.42 kg  Service Next Day by Noon' for "what does this parcel actually weigh?"): a short
    # label's meaning drowns in a long row's
    labels = [_label(row, keys) for row, keys, _ in found]
    scored = relevance(
        [row for row, _, _ in found]
        + [
            dataclasses.replace(row, text=k)
            for (row, _, _), k in zip(found, labels, strict=True)
            if k
        ]
    )
    by_label = iter(scored[len(found) :])
    scores = [
        max(rel, next(by_label)) if k else rel
        for rel, k in zip(scored[: len(found)], labels, strict=True)
    ]
    best = max(scores, default=0.0)
    few = sum(typed for _, _, typed in found) <= FEW_VALUES
    # leads on a document's page only: a photo's few texts are ranked by how they are printed
    ranked = sorted(scores, reverse=True)[:TOP_K] if by_kind and query.in_document else []
    out = []
    for (row, keys, typed), rel in zip(found, scores, strict=True):
        lone = row.box.width <= 1.05 * keys[0].box.width  # nothing level with it
        cued = any(has_cue(k.text, query.cues) for k in keys) and not (lone and not typed)
        top = rel >= MEANT and rel >= best - TOP_MARGIN
        sure = cued or top or by_kind and typed and (few or rel >= TYPED_MEANT)
        lead = not sure and rel >= RANKED_MEANT and rel in ranked
        if sure or lead:
            level = level_with(row.box, lines, row.media_index, row.timestamp)
            height = min(x.box.height for x in level)
            parts = [x.box for x in level]
            if cued and not typed:  # a header's value may be printed under it, not beside it
                under = _lines_under(row, keys, lines, height)
                row = dataclasses.replace(row, box=union_box([row.box, *under]))
                parts += under
            elif lone and not (cued or typed):  # meant alone: with the lines next to it
                near = _lines_beside(row, lines, height)
                if kind is not None:  # and the figures of its two-line entry
                    near += _value_row_beside(row, lines, height, kind)
                row = dataclasses.replace(row, box=union_box([row.box, *near]))
                parts += near
            parts.sort(key=lambda b: b.x0)
            out.append(RowUnit(row, height, rel, cued, typed, tuple(parts), lead))
    return out


def _lines_under(
    row: OcrLine, keys: list[OcrLine], lines: Sequence[OcrLine], height: float
) -> list[Box]:
    """The boxes of the lines right under a row's keys (within 2 line heights): a table's header
    over its values, a form's label over its field."""
    return [
        ln.box
        for ln in lines
        if ln.media_index == row.media_index
        and ln.timestamp == row.timestamp
        and 0 <= ln.box.y0 - row.box.y1 <= 2 * height
        and any(min(ln.box.x1, k.box.x1) > max(ln.box.x0, k.box.x0) for k in keys)
    ]


def _above_and_under(
    row: OcrLine, lines: Sequence[OcrLine], height: float
) -> tuple[list[OcrLine], list[OcrLine]]:
    """The lines of a row's frame right above it and right under it (within a line height)."""
    frame = [
        ln for ln in lines if ln.media_index == row.media_index and ln.timestamp == row.timestamp
    ]
    above = [ln for ln in frame if -0.3 * height <= row.box.y0 - ln.box.y1 <= height]
    under = [ln for ln in frame if -0.3 * height <= ln.box.y0 - row.box.y1 <= height]
    return above, under


def _lines_beside(row: OcrLine, lines: Sequence[OcrLine], height: float) -> list[Box]:
    """The boxes of the nearest line right above and right under a row (within a line height,
    overlapping it across)."""

    def across(ln: OcrLine) -> bool:
        return min(ln.box.x1, row.box.x1) > max(ln.box.x0, row.box.x0)

    above, under = (list(filter(across, side)) for side in _above_and_under(row, lines, height))
    near = []
    if above:
        near.append(max(above, key=lambda ln: ln.box.y1).box)
    if under:
        near.append(min(under, key=lambda ln: ln.box.y0).box)
    return near


def _value_row_beside(
    row: OcrLine, lines: Sequence[OcrLine], height: float, kind: str
) -> list[Box]:
    """The boxes of the nearest row right above or under a line (within a line height) that
    holds a value of `kind`: a till that prints an item's number, count and prices on one line
    and its name on the next ('2 02770034 01  2,00  14,99  29,98' over 'WC-Garnitur')."""
    above, under = _above_and_under(row, lines, height)
    valued = [r for ln in above + under if candidates((r := row_line(ln, lines)).text, kind)]
    if not valued:
        return []
    nearest = min(valued, key=lambda r: abs(r.box.y0 + r.box.y1 - row.box.y0 - row.box.y1))
    return [ln.box for ln in level_with(nearest.box, lines, row.media_index, row.timestamp)]


def _label(row: OcrLine, keys: list[OcrLine]) -> str | None:
    """A row's key, where it names one apart from its value: the text before its first colon
    ('Weight' of 'Weight: 3.42 kg'), else its leftmost line when others are level with it and it
    holds no figure (a form's label far left of its field); None for a lone text."""
    head, colon, _ = row.text.replace("：", ":").partition(":")
    if colon and head.strip() and not digit_runs(head):
        return head.strip()
    if len(keys) < 2:
        return None
    left = min(keys, key=lambda k: k.box.x0)
    return None if digit_runs(left.text) else left.text
