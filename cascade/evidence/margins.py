"""A page's margins: its running header and footer (the layout model's `header` and `footer`
regions), where a page number, a book's or a journal's name and its issue are printed.

A question about them ("Which page of the journal is this?", "这一页出自哪本书？") shares no word
with what it asks for (a bare '2763'), and no line of the page means it: what the margins hold
does. So the margins' lines are leads when a description of the margins means the question more
than any line on the page does.
"""

from __future__ import annotations

from collections.abc import Sequence

from cascade.artifacts import LayoutRegion, OcrLine

from .relevance import RelevanceModel, cosines
from .structure import Located, overlap_fraction

__all__ = ["MARGIN", "MARGIN_ROLES", "margins_meant"]

MARGIN = "margin"  # a Located's kind: a running header's or footer's lines, a lead, never answered
MARGIN_ROLES = ("header", "footer")  # the layout labels of a page's margins
# what a page's margins hold, described in both languages the readers serve
_MARGINS_HOLD = (
    "page number",
    "页码",
    "running header: the name of the book, journal or chapter and its issue",
    "页眉：书名、刊名、期号或章名",
)


def margins_meant(
    lines: Sequence[OcrLine],
    regions: Sequence[LayoutRegion],
    *,
    question: str,
    relevance: RelevanceModel,
) -> list[Located]:
    """The lines of each header and footer region, one lead per region (kind MARGIN), when what
    margins hold means `question` more than every line of the page does; else []."""
    margins = [r for r in regions if r.label in MARGIN_ROLES]
    if not margins or not lines:
        return []
    by_margin = float(cosines(question, _MARGINS_HOLD, relevance).max())
    by_line = float(cosines(question, [ln.text for ln in lines], relevance).max())
    if by_margin <= by_line:
        return []
    found = []
    for region in margins:
        inside = [ln for ln in lines if _within(ln, region)]
        if inside:
            found.append(
                Located(
                    " ".join(ln.text for ln in inside),
                    MARGIN,
                    tuple(ln.box for ln in inside),
                    inside[0].media_index,
                    inside[0].timestamp,
                    by_margin,
                )
            )
    return found


def _within(line: OcrLine, region: LayoutRegion) -> bool:
    """Does the line sit in the region? Half of the smaller of the two overlaps the other: OCR
    boxes a page number's dots and margins wider than the layout model boxes its digits."""
    return (line.media_index, line.timestamp) == (region.media_index, region.timestamp) and max(
        overlap_fraction(line.box, region.box), overlap_fraction(region.box, line.box)
    ) >= 0.5
