"""Titles and section headings: which lines head a document or a section, and which one a question
names (by number: 'section 3', '3.2', '第三章'; or by topic: 'the section about ridership').

A line heads something when several signs agree: the layout model calls its region a title, it
starts with a section number (`numbering`), its letters are larger than the page's body text
(`text_size`), space separates it from the lines around it, and it is short and does not end like
a sentence. Lines in a table, a page header or footer are not headings. The document title is the
heading that is not numbered, largest and nearest the top; when two are about as likely, both are
returned. A section no word of the question names is found by what its heading means
(`relevance`): 'Returning Faulty Items' for 'the part about sending back a broken kettle'.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from cascade.artifacts import Box, LayoutRegion, OcrLine

from .numbering import SectionNumber, parse_number, split_numbering
from .relevance import RelevanceModel, best_by_meaning, cosines
from .structure import Located, Page, overlap_fraction, pages, text_length, text_size, union_box
from .textmatch import cjk_coverage, key_match, normalize, phrase_score

__all__ = [
    "LEAD_HEADING",
    "Heading",
    "headings",
    "document_title",
    "section_heading",
    "heading_lines",
    "heading_meant",
    "heads_text",
    "off_page",
]

NOT_HEADINGS = ("table", "header", "footer", "equation", "reference")
MIN_SCORE = 1.5  # least heading score (see `_heading_score`)
MAX_WORDS = 16  # longer lines are body text (a Chinese word: two characters)
TITLE_MARGIN = 1.0  # title candidates within this of the best one are all returned
SAME_LEVEL = 0.8  # headings scoring this share of the best are counted as one level's sections
LEAD_HEADING = "heading lead"  # a Heading's kind: sent to the VLM, never a tool's answer
# a line ending so is a sentence; a question mark ends FAQ headings and article titles too
_SENTENCE_END = re.compile(r"[.!;,。！；，…]$")


@dataclass(frozen=True)
class Heading(Located):
    """A title or section heading: `text` as read, `number` its section number if it has one,
    `name` the text after the number."""

    number: SectionNumber | None = None
    name: str = ""


def _gap_above(page: Page, line: OcrLine) -> float:
    above = [
        o.box.y1
        for o in page.lines
        if o is not line
        and o.box.y1 <= line.box.y0 + 1
        and min(o.box.x1, line.box.x1) > max(o.box.x0, line.box.x0)
    ]
    return line.box.y0 - max(above) if above else float("inf")


def _shares_row(page: Page, line: OcrLine) -> bool:
    """Another line sits on its row close by (a table row, a key and its value), or two others do
    (a row of cells); a line in the next column of the page, a gutter away, does not count, nor
    does one of another size (a page's sidebars beside its big title)."""
    b = line.box
    mates = [
        o
        for o in page.lines
        if o is not line
        and min(o.box.y1, b.y1) - max(o.box.y0, b.y0) >= 0.5 * min(o.box.height, b.height)
        and 0.75 <= o.box.height / b.height <= 1 / 0.75
    ]
    gutter = 4 * page.body_height
    shared = len(mates) >= 2 or any(max(o.box.x0 - b.x1, b.x0 - o.box.x1) < gutter for o in mates)
    return shared and not _heads_paragraph(page, line)


def _heads_paragraph(page: Page, line: OcrLine) -> bool:
    """The line right under it, starting where it starts, is running text wider than it (six
    words or more): a card's heading over its text, beside its peers on a grid of cards. A
    table's header is over a cell, short."""
    b = line.box
    under = [
        o
        for o in page.lines
        if 0 <= o.box.y0 - b.y1 <= 1.5 * b.height and abs(o.box.x0 - b.x0) <= b.height
    ]
    return any(
        text_length(o.text, cjk_weight=0.5) >= 6 and o.box.width >= 1.3 * b.width for o in under
    )


def _heading_score(page: Page, line: OcrLine) -> tuple[float, SectionNumber | None, str]:
    """(score, number, name): >= MIN_SCORE means the line heads something."""
    text = line.text.strip()
    words = text_length(text, cjk_weight=0.5)
    if words == 0 or words > MAX_WORDS:
        return 0.0, None, text
    title = page.region_of(line, ["title"])
    if title is None and _not_a_heading_place(page, line):
        return 0.0, None, text
    numbered = split_numbering(text)
    number, name = numbered if numbered else (None, text)
    score = 1.2 * title.confidence if title else 0.0
    score += 1.0 if numbered and name else 0.0
    if page.body_size > 0:
        score += min(2.0, max(0.0, 4.0 * (text_size(line) / page.body_size - 1.0)))
    score += 0.5 if _gap_above(page, line) >= 0.6 * page.body_height else 0.0
    score -= 2.0 if _SENTENCE_END.search(text) else 0.0
    score -= 1.0 if _shares_row(page, line) else 0.0
    score -= 0.25 * max(0, words - 8)
    return score, number, name


def _not_a_heading_place(page: Page, line: OcrLine) -> bool:
    """The layout model puts the line in a table, header, footer ... and in nothing it is surer of
    (a column of body text it half takes for a reference list is still body text). A table
    holds cells among cells: a line alone on its row is not one (the model takes a bordered
    page, headings and all, for a table)."""
    veto = page.region_of(line, NOT_HEADINGS)
    if veto is not None and veto.label == "table" and not _shares_row(page, line):
        veto = page.region_of(line, [label for label in NOT_HEADINGS if label != "table"])
    return veto is not None and not any(
        r.confidence > veto.confidence
        for r in page.regions
        if r.label not in NOT_HEADINGS and overlap_fraction(line.box, r.box) >= 0.5
    )


def _peer_of(page: Page, line: OcrLine, heads: Sequence[_Head]) -> bool:
    """A short line set like the page's headings: the size of one of them (within 6 %) and
    larger than the body, space above it, text right under it, alone on its row, not ending
    like a sentence. A document's headings share one style; the one the layout model and the
    size cues missed is still one of them."""
    size = text_size(line)
    return (
        _short_line(line)
        and size >= 1.04 * page.body_size
        and not _shares_row(page, line)
        and _gap_above(page, line) >= 0.4 * page.body_height
        and heads_text(page, line.box)
        and not _not_a_heading_place(page, line)
        and any(h.number is None and abs(h.size - size) <= 0.06 * h.size for h in heads)
    )


@dataclass
class _Head:
    """A heading while it is read: its lines on the level page, score, number and name."""

    lines: list[OcrLine]
    score: float
    number: SectionNumber | None
    name: str

    @property
    def box(self) -> Box:
        return union_box(ln.box for ln in self.lines)

    @property
    def size(self) -> float:
        return max(text_size(ln) for ln in self.lines)

    def emit(self, page: Page, kind: str, score: float) -> Heading:
        text = " ".join(ln.text.strip() for ln in self.lines)
        return Heading(
            text,
            kind,
            page.source_boxes(self.lines),
            page.media_index,
            page.timestamp,
            score,
            self.number,
            self.name,
        )


def _page_heads(page: Page) -> list[_Head]:
    scored = [(line, *_heading_score(page, line)) for line in page.lines]
    sure = [
        _Head([line], score, number, name)
        for line, score, number, name in scored
        if score >= MIN_SCORE
    ]
    found: list[_Head] = []
    for line, score, number, name in scored:
        if score < MIN_SCORE and _peer_of(page, line, sure):
            score = MIN_SCORE
        if score < MIN_SCORE:
            continue
        prev = found[-1] if found else None
        if prev is not None and number is None and _continues(prev.lines[-1].box, line.box):
            prev.lines.append(line)
            prev.score, prev.name = max(prev.score, score), f"{prev.name} {name}".strip()
        else:
            found.append(_Head([line], score, number, name))
    return found


def _continues(last: Box, b: Box) -> bool:
    """A heading wrapped onto a second line: right below, about as tall, starting near it."""
    return (
        0 <= b.y0 - last.y1 <= 0.6 * last.height
        and 0.8 <= b.height / last.height <= 1.25
        and (
            abs(b.x0 - last.x0) <= last.height
            or abs((b.x0 + b.x1) - (last.x0 + last.x1)) <= 2 * last.height
        )
    )


def heading_lines(page: Page) -> set[int]:
    """The ids of the page's lines that are (part of) a title or heading."""
    return {id(ln) for h in _page_heads(page) for ln in h.lines}


def headings(lines: Iterable[OcrLine], regions: Iterable[LayoutRegion] = ()) -> list[Heading]:
    """Every title and section heading, page by page, in reading order."""
    return [
        h.emit(page, "heading", h.score)
        for page in pages(lines, regions)
        for h in _page_heads(page)
    ]


def document_title(lines: Iterable[OcrLine], regions: Iterable[LayoutRegion] = ()) -> list[Heading]:
    """The document's title: the candidates within TITLE_MARGIN of the best, best first (one
    text per distinct title), and the best's block mate (`_block_mate`) as a lead. A title is an
    unnumbered heading with text below it; larger and nearer the top is likelier. On a page of
    numbered sections whose title did not score as a heading (its body text unread, say), the
    largest unnumbered line above the first section is the candidate. [] when no page has
    one."""
    lines = list(lines)
    scored: list[Heading] = []
    sizes: dict[int, float] = {}  # id(Heading) -> its text size over the page's body text's
    running: list[Heading] = []  # each page's running title (`_running_title`), leads
    titled: set[int] = set()  # id(Heading) of those in a layout title region
    for page in pages(lines, regions):
        running += _running_title(page)
        heads = _page_heads(page)
        heads += _title_over_sections(page, heads)
        if not heads:
            continue
        top = min(h.box.y0 for h in heads)
        largest = max(h.size for h in heads)
        for h in heads:
            # the page's top line, set apart above the text (a running title, a header over a
            # gap): a candidate too, a margin lower: recall first, the VLM sees both
            apart = h.box.y0 == top and not heads_text(page, h.box) and _above_text(page, h.box)
            if (
                h.number is not None
                or not any(ch.isalpha() for ln in h.lines for ch in ln.text)  # a price, a date
                or not (heads_text(page, h.box) or apart)
                or all(off_page(page, ln) for ln in h.lines)
            ):
                continue
            score = h.score + 2.0 * h.size / largest + (1.0 if h.box.y0 == top else 0.0)
            score -= TITLE_MARGIN if apart else 0.0
            # its text again elsewhere on the page: a name that signs the page (an office's
            # letterhead and signature), not the document's title
            score -= 2.0 if _repeated(page, h) else 0.0
            scored.append(h.emit(page, "title", score))
            sizes[id(scored[-1])] = h.size / page.body_size if page.body_size > 0 else 1.0
            if any(page.region_of(ln, ["title"]) is not None for ln in h.lines):
                titled.add(id(scored[-1]))
    best = _best(scored, TITLE_MARGIN)
    leads = _block_mate(scored, best, lines) + _as_large(scored, best, sizes)
    if best and id(best[0]) in titled:  # the layout model's title: the header is a letterhead
        running = []
    taken = {normalize(h.text) for h in best + leads}
    return best + leads + [h for h in running if normalize(h.text) not in taken]


def _as_large(
    scored: Sequence[Heading], best: Sequence[Heading], sizes: dict[int, float]
) -> list[Heading]:
    """The largest other candidate set about as large as a display-size best title (twice the
    body text or more; the other within 10 % of it), as a lead: a cover's or a poster's label
    and its headline are set alike, and which one the question means is the VLM's to read."""
    if not best:
        return []
    taken = {normalize(h.text) for h in best}
    rest = [h for h in scored if normalize(h.text) not in taken]
    large = max(rest, key=lambda h: sizes[id(h)], default=None)
    size = max(sizes[id(h)] for h in best)
    if large is None or size < 2.0 or sizes[id(large)] < 0.9 * size:
        return []
    return [replace(large, kind=LEAD_HEADING)]


def _running_title(page: Page) -> list[Heading]:
    """The longest text line of the page's header region, as a lead where the layout model
    marks no title for the best candidate: a report's or a paper's running header often repeats
    its title, and the layout model's header is no heading place. A page number or a date has
    no letters and is none."""
    held = [
        ln
        for ln in page.lines
        if page.region_of(ln, ["header"]) is not None
        and _short_line(ln)
        and any(ch.isalpha() for ch in ln.text)
        and not off_page(page, ln)
    ]
    if not held:
        return []
    line = max(held, key=lambda ln: text_length(ln.text, cjk_weight=0.5))
    head = _Head([line], MIN_SCORE, None, line.text.strip())
    return [head.emit(page, LEAD_HEADING, MIN_SCORE)]


def _block_mate(
    scored: Sequence[Heading], best: Sequence[Heading], lines: Sequence[OcrLine]
) -> list[Heading]:
    """The likeliest other candidate of the best title's block, as a lead (`LEAD_HEADING`):
    both centred on the page's text, within 3 of the title's heights above or below it and at
    least 0.6 of its line height; an office's letterhead over the document's own title, a series
    name over an issue's, where the scores cannot tell which the question means (the tool then
    abstains between them). A section's heading flush left under a title is not one."""
    if not best:
        return []
    top = best[0]
    box, taken = union_box(top.boxes), {normalize(h.text) for h in best}
    own = [
        ln.box for ln in lines if (ln.media_index, ln.timestamp) == (top.media_index, top.timestamp)
    ]
    left, right = min(b.x0 for b in own), max(b.x1 for b in own)

    def centred(b: Box) -> bool:
        return abs((b.x0 + b.x1) - (left + right)) / 2 <= 0.1 * (right - left)

    if not centred(box):
        return []

    def in_block(h: Heading) -> bool:
        b = union_box(h.boxes)
        return (
            centred(b)
            and max(b.y0 - box.y1, box.y0 - b.y1) <= 3 * box.height
            and h.boxes[0].height >= 0.6 * top.boxes[0].height
        )

    near = [
        h
        for h in scored
        if normalize(h.text) not in taken
        and (h.media_index, h.timestamp) == (top.media_index, top.timestamp)
        and in_block(h)
    ]
    mate = max(near, key=lambda h: h.score, default=None)
    return [replace(mate, kind=LEAD_HEADING)] if mate is not None else []


def _repeated(page: Page, head: _Head) -> bool:
    text = normalize(" ".join(ln.text for ln in head.lines))
    return any(
        all(ln is not own for own in head.lines) and normalize(ln.text) == text for ln in page.lines
    )


def off_page(page: Page, line: OcrLine) -> bool:
    """On a page photographed at an angle, a line still at an angle once the page is read level
    (off by over half the page's turn, at least 3 degrees) is not the page's: it is the photo's
    own text (a shop sign, a number on a bus), level in the photo."""
    return bool(page.skew) and abs(line.angle) > max(3.0, abs(page.skew) / 2)


def heads_text(page: Page, b: Box) -> bool:
    """At least two lines below the heading, the nearest of those under it (within one of its
    widths to either side: a centred title over left-aligned headings) no more than 3 of its
    heights down: text it heads. A photo's own big word beside a photographed page (on a bus, a
    shop front) has the page's lines below it, but not right under it."""
    below = [ln for ln in page.lines if ln.box.y0 >= b.y1 - 1]
    under = [ln for ln in below if min(ln.box.x1, b.x1 + b.width) > max(ln.box.x0, b.x0 - b.width)]
    return len(below) >= 2 and bool(under) and min(ln.box.y0 for ln in under) - b.y1 <= 3 * b.height


def _above_text(page: Page, b: Box) -> bool:
    """Two lines or more below the box, the nearest of them right under it (within one of its
    widths to either side) and within 8 of its heights: a running title over a gap, not a
    photo's own big word beside the page."""
    below = [ln for ln in page.lines if ln.box.y0 >= b.y1 - 1]
    if len(below) < 2:
        return False
    nearest = min(below, key=lambda ln: ln.box.y0).box
    under = min(nearest.x1, b.x1 + b.width) > max(nearest.x0, b.x0 - b.width)
    return under and nearest.y0 - b.y1 <= 8 * b.height


def _title_over_sections(page: Page, heads: list[_Head]) -> list[_Head]:
    numbered = [ln for ln in page.lines if _short_line(ln) and split_numbering(ln.text)]
    if len(numbered) < 2 or any(h.number is None and h.box.y1 <= numbered[0].box.y0 for h in heads):
        return []
    above = [
        ln
        for ln in page.lines
        if ln.box.y1 <= numbered[0].box.y0 + 1
        and split_numbering(ln.text) is None
        and _short_line(ln)
    ]
    if not above:
        return []
    # a letterhead or running header above the title is not it
    line = max(
        above, key=lambda ln: (page.region_of(ln, ("header", "footer")) is None, text_size(ln))
    )
    return [_Head([line], MIN_SCORE, None, line.text.strip())]


def _short_line(line: OcrLine) -> bool:
    """Short enough for a heading, and not ending like a sentence."""
    return 0 < text_length(line.text, cjk_weight=0.5) <= MAX_WORDS and not _SENTENCE_END.search(
        line.text.strip()
    )


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


def section_heading(
    lines: Iterable[OcrLine],
    regions: Iterable[LayoutRegion] = (),
    *,
    number: int | str | Sequence[int] | None = None,
    topic: str | None = None,
    relevance: RelevanceModel | None = None,
) -> list[Heading]:
    """The heading of section `number` (3, '3.2', 'III', '三', (3, 2)), or of the section about
    `topic`: the heading that names it, else the heading above the text that does, else (with a
    `relevance` model) the heading that means it ('Returning Faulty Items' for 'sending back a
    kettle that stopped working'; a number is never matched by meaning). Several different texts
    mean several sections fit (a caller that must answer abstains)."""
    if number is None and not topic:
        raise ValueError("section_heading needs a number or a topic")
    topic = topic or ""  # read only when number is None, and then the check above saw a topic
    wanted = _as_number(number) if number is not None else None
    lines, regions = list(lines), list(regions)
    named, under = [], []
    for page in pages(lines, regions):
        heads = _page_heads(page)
        for h in heads:
            if wanted is not None:
                if h.number == wanted:
                    named.append(h.emit(page, "heading", h.score))
                continue
            fit = max(
                key_match(topic, h.name), phrase_score(topic, h.name), cjk_coverage(topic, h.name)
            )
            if fit >= 0.5:
                named.append(h.emit(page, "heading", fit))
        if wanted is None:
            under += _heads_above_topic(page, heads, topic)
    if wanted is not None:
        return _best(named, margin=float("inf")) or _nth_heading(lines, regions, wanted)
    if not named and not under:
        return heading_meant(lines, regions, topic=topic, relevance=relevance)
    return _best(named or under, margin=0.0)


def _nth_heading(
    lines: list[OcrLine], regions: list[LayoutRegion], wanted: SectionNumber | None
) -> list[Heading]:
    """Section `n` of a document whose headings carry no numbers at all ('第五部分', 'the second
    section'): its n-th heading under the title, in reading order, as a lead (`LEAD_HEADING`)."""
    if wanted is None or len(wanted) != 1 or wanted[0] < 1:
        return []
    titles = {t.text for t in document_title(lines, regions)}
    heads = [(page, h) for page in pages(lines, regions) for h in _page_heads(page)]
    if any(h.number is not None for _, h in heads):
        return []
    heads = [(page, h) for page, h in heads if h.emit(page, "", 0).text not in titles]
    # sections are counted at one level: the headings scoring near the best (a short body line
    # that only looks like a heading is not one of them)
    best = max((h.score for _, h in heads), default=0.0)
    heads = [(page, h) for page, h in heads if h.score >= SAME_LEVEL * best]
    if len(heads) < wanted[0]:
        return []
    page, h = heads[wanted[0] - 1]
    return [h.emit(page, LEAD_HEADING, h.score)]


def heading_meant(
    lines: Iterable[OcrLine],
    regions: Iterable[LayoutRegion] = (),
    *,
    topic: str | Sequence[str],
    relevance: RelevanceModel | None,
) -> list[Heading]:
    """The section headings whose names mean `topic`, one wording or several
    (`relevance.best_by_meaning`: one is a decision, several are leads), then the heading over
    the text that means it most, where that text means it more than the name: a question
    paraphrases a section's text more often than its name ('a taxi to a client' under
    'Spending Company Money'). A short line over a paragraph is a heading here too (bold
    headings at the body's size, with no gap over them), but only a lead (`LEAD_HEADING`), as is
    a heading over the text meant. The title heads the whole page, never one section. [] without
    a model."""
    if relevance is None:
        return []
    lines, regions = list(lines), list(regions)
    # the likeliest title only: on a page of headings alike in size the other candidates are
    # its sections ('If You Are Unwell' in a handbook chapter), and they may be the one meant
    titles = {t.text for t in document_title(lines, regions)[:1]}
    every, body = [], []
    for page in pages(lines, regions):
        heads = [h for h in _page_heads(page) if h.emit(page, "", 0).text not in titles]
        in_heads = {id(ln) for h in heads for ln in h.lines}
        heads += [
            _Head([ln], 0.0, None, ln.text.strip())
            for ln in page.lines
            if id(ln) not in in_heads
            and ln.text.strip() not in titles
            and _short_line(ln)
            and _heads_paragraph(page, ln)
        ]
        heads.sort(key=lambda h: (h.box.y0, h.box.x0))
        every += [(page, h) for h in heads]
        in_heads = {id(ln) for h in heads for ln in h.lines}
        body += [(page, heads, ln) for ln in page.lines if id(ln) not in in_heads]

    def kind(h: _Head) -> str:
        return "heading" if h.score >= MIN_SCORE else LEAD_HEADING

    names = [h.name or h.lines[0].text for _, h in every]
    picked = best_by_meaning(topic, names, relevance)
    named = _best([h.emit(page, kind(h), 0.5) for page, h in (every[i] for i in picked)], 0.0)
    texts = [ln.text for _, _, ln in body]
    meant = best_by_meaning(topic, texts, relevance)[:2]
    if named and meant:
        # a name can mean the question less than another section's text does ('一碗决定成败的
        # 料汁' over the sugar, vinegar and soy ratio): that text's heading follows as a lead
        by_name = cosines(topic, [names[picked[0]]], relevance)[0]
        by_text = cosines(topic, [texts[i] for i in meant], relevance)
        meant = [i for i, cos in zip(meant, by_text, strict=True) if cos > by_name]
    over_text = []
    for i in meant:
        page, heads, ln = body[i]
        head = _head_above(heads, ln)
        if head is not None:
            over_text.append(head.emit(page, LEAD_HEADING, 0.5))
    taken = {normalize(h.text) for h in named}
    return named + [h for h in _best(over_text, 0.0) if normalize(h.text) not in taken]


def heading_beside(
    lines: Iterable[OcrLine],
    regions: Iterable[LayoutRegion] = (),
    *,
    topic: str,
    relation: str,
    relevance: RelevanceModel | None = None,
) -> list[Heading]:
    """The section heading right after (relation 'after') or before ('before') the section
    about `topic`, in reading order ("which section comes after Parking Rules?"); the title is
    no section. [] when the topic's section is not found or has no neighbour there."""
    lines, regions = list(lines), list(regions)
    titles = {t.text for t in document_title(lines, regions)}
    every = [h for h in headings(lines, regions) if h.text not in titles]
    step = 1 if relation == "after" else -1
    out = []
    for named in section_heading(lines, regions, topic=topic, relevance=relevance):
        at = next(
            (i for i, h in enumerate(every) if (h.text, h.boxes) == (named.text, named.boxes)), None
        )
        if at is not None and 0 <= at + step < len(every):
            out.append(every[at + step])
    return out


def _heads_above_topic(page: Page, heads: list[_Head], topic: str) -> list[Heading]:
    """The headings of the sections whose text best holds the topic (at least half of it)."""
    heading_lines = {id(ln) for h in heads for ln in h.lines}
    body = [ln for ln in page.lines if id(ln) not in heading_lines]
    scores = [phrase_score(topic, ln.text) for ln in body]
    best = max(scores, default=0.0)
    if best < 0.5:
        return []
    out = []
    for ln, score in zip(body, scores, strict=True):
        head = _head_above(heads, ln) if score == best else None
        if head is not None:
            out.append(head.emit(page, "heading", score))
    return out


def _head_above(heads: Sequence[_Head], line: OcrLine) -> _Head | None:
    """The heading a line falls under: the last one above it (in a column that overlaps the
    line, so a two-column page keeps its columns apart when it can)."""
    above = [h for h in heads if h.box.y1 <= line.box.y0 + 1]
    same_column = [h for h in above if min(h.box.x1, line.box.x1) > max(h.box.x0, line.box.x0)]
    pick = same_column or above
    return max(pick, key=lambda h: h.box.y1) if pick else None
