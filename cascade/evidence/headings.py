"""Titles and section headings: which lines head a document or a section, and which one a question
names (by number: 'section 3', '3.2', '第三章'; or by topic: 'the section about ridership').

A line heads something when several signs agree: the layout model calls its region a title, it
starts with a section number (`numbering`), its text is taller than the page's body text, space
separates it from the lines around it, and it is short and does not end like a sentence. Lines
in a table, a page header or footer are not headings. The document title is the heading that is
not numbered, tallest and nearest the top; when two are about as likely, both are returned.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cascade.artifacts import LayoutRegion, OcrLine

from .numbering import SectionNumber, parse_number, split_numbering
from .structure import Located, Page, pages, text_length, union_box
from .textmatch import key_match, normalize, phrase_score

__all__ = ["Heading", "headings", "document_title", "section_heading", "section_of"]

NOT_HEADINGS = ("table", "header", "footer", "equation", "reference")
MIN_SCORE = 1.5  # least heading score (see `_heading_score`)
MAX_WORDS = 16  # longer lines are body text
TITLE_MARGIN = 1.0  # title candidates within this of the best one are all returned
_SENTENCE_END = re.compile(r"[.!?;,。！？；，…]$")


@dataclass(frozen=True)
class Heading(Located):
    """A title or section heading: `text` as read, `number` its section number if it has one,
    `name` the text after the number."""

    number: SectionNumber | None = None
    name: str = ""


def _gap_above(page: Page, line: OcrLine) -> float:
    above = [o.box.y1 for o in page.lines if o is not line and o.box.y1 <= line.box.y0 + 1
             and min(o.box.x1, line.box.x1) > max(o.box.x0, line.box.x0)]
    return line.box.y0 - max(above) if above else float("inf")


def _shares_row(page: Page, line: OcrLine) -> bool:
    b = line.box
    return any(o is not line and min(o.box.y1, b.y1) - max(o.box.y0, b.y0)
               >= 0.5 * min(o.box.height, b.height) for o in page.lines)


def _heading_score(page: Page, line: OcrLine) -> tuple[float, SectionNumber | None, str]:
    """(score, number, name): >= MIN_SCORE means the line heads something."""
    text = line.text.strip()
    words = text_length(text)
    if words == 0 or words > MAX_WORDS:
        return 0.0, None, text
    title = page.region_of(line, ["title"])
    if title is None and page.region_of(line, NOT_HEADINGS) is not None:
        return 0.0, None, text
    numbered = split_numbering(text)
    number, name = numbered if numbered else (None, text)
    score = 2.0 * title.confidence if title else 0.0
    score += 1.0 if numbered and name else 0.0
    if page.body_height > 0:
        score += min(2.0, max(0.0, 4.0 * (line.box.height / page.body_height - 1.0)))
    score += 0.5 if _gap_above(page, line) >= 0.6 * page.body_height else 0.0
    score -= 2.0 if _SENTENCE_END.search(text) else 0.0
    score -= 1.0 if _shares_row(page, line) else 0.0
    score -= 0.25 * max(0, words - 8)
    return score, number, name


def _page_headings(page: Page) -> list[Heading]:
    found: list[Heading] = []
    for line in page.lines:
        score, number, name = _heading_score(page, line)
        if score < MIN_SCORE:
            continue
        prev = found[-1] if found else None
        if prev is not None and number is None and _continues(prev, line):
            found[-1] = Heading(f"{prev.text} {line.text.strip()}".strip(), prev.kind,
                                prev.boxes + (line.box,), page.media_index, page.timestamp,
                                max(prev.score, score), prev.number,
                                f"{prev.name} {name}".strip())
            continue
        found.append(Heading(line.text.strip(), "heading", (line.box,), page.media_index,
                             page.timestamp, score, number, name))
    return found


def _continues(prev: Heading, line: OcrLine) -> bool:
    """A heading wrapped onto a second line: right below, about as tall, starting near it."""
    last = prev.boxes[-1]
    b = line.box
    return 0 <= b.y0 - last.y1 <= 0.6 * last.height and 0.8 <= b.height / last.height <= 1.25 \
        and (abs(b.x0 - last.x0) <= last.height or abs((b.x0 + b.x1) - (last.x0 + last.x1))
             <= 2 * last.height)


def headings(lines: Iterable[OcrLine], regions: Iterable[LayoutRegion] = ()) -> list[Heading]:
    """Every title and section heading, page by page, in reading order."""
    return [h for page in pages(lines, regions) for h in _page_headings(page)]


def document_title(lines: Iterable[OcrLine],
                   regions: Iterable[LayoutRegion] = ()) -> list[Heading]:
    """The document's title: the candidates within TITLE_MARGIN of the best, best first (one
    text per distinct title). A title is an unnumbered heading with text below it; taller and
    nearer the top is likelier. [] when no page has one."""
    scored: list[Heading] = []
    for page in pages(lines, regions):
        found = _page_headings(page)
        if not found:
            continue
        top = min(h.box.y0 for h in found)
        tallest = max(h.box.height / len(h.boxes) for h in found)
        for h in found:
            below = [ln for ln in page.lines if ln.box.y0 >= h.box.y1 - 1]
            if h.number is not None or len(below) < 2:
                continue
            score = h.score + 2.0 * (h.box.height / len(h.boxes)) / tallest
            score += 1.0 if h.box.y0 == top else 0.0
            scored.append(Heading(h.text, "title", h.boxes, h.media_index, h.timestamp, score,
                                  None, h.name))
    return _best(scored, TITLE_MARGIN)


def _best(found: Sequence[Heading], margin: float) -> list[Heading]:
    """Those within `margin` of the best score, best first, one per distinct text."""
    if not found:
        return []
    best = max(h.score for h in found)
    out: dict[str, Heading] = {}
    for h in sorted(found, key=lambda h: -h.score):
        if h.score >= best - margin:
            out.setdefault(normalize(h.text), h)
    return list(out.values())


def _as_number(number: int | str | Sequence[int]) -> SectionNumber | None:
    if isinstance(number, int):
        return (number,)
    if isinstance(number, str):
        split = split_numbering(number)
        return split[0] if split and not split[1] else parse_number(number)
    return tuple(int(n) for n in number)


def section_heading(lines: Iterable[OcrLine], regions: Iterable[LayoutRegion] = (), *,
                    number: int | str | Sequence[int] | None = None,
                    topic: str | None = None) -> list[Heading]:
    """The heading of section `number` (3, '3.2', 'III', '三', (3, 2)), or of the section about
    `topic`: the heading that names it, else the heading above the text that does. Several
    results mean several sections fit (a caller that must answer abstains)."""
    lines = list(lines)
    regions = list(regions)
    found = headings(lines, regions)
    if number is not None:
        wanted = _as_number(number)
        return _best([h for h in found if h.number == wanted], margin=float("inf"))
    if not topic:
        raise ValueError("section_heading needs a number or a topic")
    named = []
    for h in found:
        fit = max(key_match(topic, h.name), phrase_score(topic, h.name))
        if fit >= 0.5:
            named.append(Heading(h.text, h.kind, h.boxes, h.media_index, h.timestamp, fit,
                                 h.number, h.name))
    if named:
        return _best(named, margin=0.0)
    return _heading_above_topic(lines, regions, found, topic)


def _heading_above_topic(lines: list[OcrLine], regions: list[LayoutRegion],
                         found: list[Heading], topic: str) -> list[Heading]:
    heads = {id(h): h for h in found}
    hits: list[Heading] = []
    for page in pages(lines, regions):
        page_heads = [h for h in found if h.media_index == page.media_index
                      and h.timestamp == page.timestamp]
        best = max((phrase_score(topic, ln.text) for ln in page.lines), default=0.0)
        if best < 0.5:
            continue
        for ln in page.lines:
            if phrase_score(topic, ln.text) == best:
                head = section_of(page_heads, ln)
                if head is not None and id(head) in heads:
                    hits.append(Heading(head.text, head.kind, head.boxes, head.media_index,
                                        head.timestamp, best, head.number, head.name))
    return _best(hits, margin=0.0)


def section_of(page_headings: Sequence[Heading], line: OcrLine) -> Heading | None:
    """The heading a line falls under: the last heading above it on its page (in a column that
    overlaps the line, so a two-column page keeps its columns apart when it can)."""
    above = [h for h in page_headings if h.box.y1 <= line.box.y0 + 1]
    same_column = [h for h in above if min(h.box.x1, line.box.x1) > max(h.box.x0, line.box.x0)]
    pick = same_column or above
    return max(pick, key=lambda h: h.box.y1) if pick else None
