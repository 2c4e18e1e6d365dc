"""Where a document holds the answer to a `Query`, and the exact span a tool may answer with.

`located_for` asks the structure reader the query's target names (`headings`, `tables`,
`paragraphs`, `codeblocks`) and returns **every** plausible region, best first (recall first: a
caller that sends crops sends them all). `answer_span` is the tool's side: one distinct text, then
the exact span of the answer type inside it (`spans.exact_span`), or None with the reason
(precision first: several candidates, or no single span of that type, abstain).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from cascade.artifacts import LayoutRegion, OcrLine

from . import codeblocks, headings, margins, paragraphs, spans, structure, tables
from .blocks import norm_text
from .query import DOCUMENT_TARGETS, Query, singular
from .relevance import RelevanceModel, default_relevance
from .structure import Located
from .textmatch import same_word, words

__all__ = [
    "located_for",
    "answer_span",
    "SPAN_KINDS",
    "LEAD",
    "MEANT",
    "MARGIN",
    "MEANT_CELL",
    "SENTENCE_MEANT",
]

LEAD = "lead"  # a Located's kind: found by the question's second reading, sent, never answered
MIN_CUES = 3  # content words a question needs for a heading to be ranked by them too
MEANT_CELL = "cell meant"  # a cell or row whose keys only mean the question's: never answered
SENTENCE_MEANT = paragraphs.SENTENCE_MEANT  # a sentence that only means it: never answered
MARGIN = margins.MARGIN  # a running header's or footer's lines the question means: never answered
MEANT = (SENTENCE_MEANT, MEANT_CELL, MARGIN)  # the kinds found by meaning alone
# a date alone on its line, sent for a date no sentence gives (`_datelines`): never answered
DATELINE = "dateline"

# Query answer types -> span kinds (`spans.KINDS`); a whole heading or title is `text`.
SPAN_KINDS = {
    "day": "weekday",
    "date": "date",
    "time": "time",
    "when": "when",
    "amount": "amount",
    "id": "id",
    "identifier": "identifier",
    "number": "number",
    "cell": "cell",
    "text": "text",
}


def _cue_words(query: Query) -> list[str]:
    """The question's cue words in its order, as written ('keys', not the cue 'key'); a
    hyphenated word whole where it is a cue ('post-decontamination'), else its cue parts."""
    out = []
    for word in re.findall(r"[^\W_]+(?:-[^\W_]+)*", query.question):
        parts = [word] if singular(word.lower()) in query.cues else word.split("-")
        out += [p for p in parts if singular(p.lower()) in query.cues]
    return out


FIGURES = ("amount", "percent", "number")  # kinds a cell asked for one figure must hold once


def _phrase(query: Query) -> str:
    """The question's content words as written ('keys', not the cue 'key')."""
    if query.language == "zh":
        return " ".join(query.cues)
    return " ".join(dict.fromkeys(_cue_words(query)))


def located_for(
    query: Query,
    lines: Sequence[OcrLine],
    regions: Sequence[LayoutRegion] = (),
    relevance: RelevanceModel | None = None,
) -> tuple[list[Located], str]:
    """(the regions that may hold the answer, best first; what was looked for). Empty when the
    target is not a document's, or nothing fits. Where the question's words name no heading or
    column, `relevance` (default: `default_relevance()`) finds the one that means it. Where the
    question has a second reading (`Query.second_kind`: the rules and the learned reader differ),
    its regions follow as leads (`LEAD`: sent, never a tool's answer)."""
    lines, regions = list(lines), list(regions)
    relevance = relevance or default_relevance()
    if not lines:
        return [], "no text"
    found, what = _located(query, lines, regions, relevance)
    other = query.second_kind
    if other in DOCUMENT_TARGETS and other != query.target:
        # what only means the question is looked for on the first reading: on a second one it
        # would be a guess on a guess, and crowd out the first reading's evidence
        leads, why = _located(
            replace(query, target=other, second_kind=None), lines, regions, relevance, False
        )
        seen = {(f.text, f.boxes) for f in found}  # found both ways: the first reading's
        found += [replace(f, kind=LEAD) for f in leads if (f.text, f.boxes) not in seen]
        what = "; ".join(filter(None, (what, f"read as {other}: {why}")))
    if relevance is not None:  # a page number or a journal's name, asked in no word it prints
        seen = {(f.text, f.boxes) for f in found}
        meant = margins.margins_meant(lines, regions, question=query.question, relevance=relevance)
        found += [f for f in meant if (f.text, f.boxes) not in seen]
        if meant:
            what = "; ".join(filter(None, (what, f"page margins meant: {len(meant)}")))
    return found, what


def _located(
    query: Query,
    lines: list[OcrLine],
    regions: list[LayoutRegion],
    relevance: RelevanceModel | None,
    by_meaning: bool = True,
) -> tuple[list[Located], str]:
    target = query.target
    if target == "title":
        titles: list[Located] = list(headings.document_title(lines, regions))
        if titles:
            return titles, "title candidates"
        return _tallest_lines(
            lines, regions
        ), "no heading structure (a page at an angle?): the tallest lines"
    if target == "heading":
        if query.section_number:
            heads = headings.section_heading(lines, regions, number=query.section_number)
            sought = f"heading of section {query.section_number}"
        elif query.section_name:
            heads = headings.section_heading(
                lines, regions, topic=query.section_name, relevance=relevance
            )
            sought = f"heading of the section about '{query.section_name}'"
        elif (order := query.time_order) and order.relation in ("after", "before") and order.anchor:
            heads = headings.heading_beside(
                lines, regions, topic=order.anchor, relation=order.relation, relevance=relevance
            )
            sought = f"heading of the section {order.relation} '{order.anchor}'"
        else:  # no topic picked out of the question: the heading that means the question
            heads = headings.heading_meant(
                lines, regions, topic=_wordings(query), relevance=relevance
            )
            sought = "section heading meant by the question"
        if not heads and not query.section_number and "meant" not in sought:
            # the topic or the neighbour read out of the question names no heading ("what
            # happens if I hand it in after the due date": no section after 'due date'): the
            # heading the whole question means, a lead
            meant = headings.heading_meant(
                lines, regions, topic=_wordings(query), relevance=relevance
            )
            heads = [replace(h, kind=headings.LEAD_HEADING) for h in meant]
            sought += ": not found, the heading the question means"
        if heads:
            return list(heads), sought
        # not found: every heading is a lead for the VLM, never a tool's answer (`answer_span`)
        return (
            [replace(h, kind="any heading") for h in headings.headings(lines, regions)],
            f"{sought}: not found, every heading",
        )
    found: list[Located] = []
    what: list[str] = []
    if query.row_key and query.column_key:
        cells = tables.table_cell(
            lines, regions, row_key=query.row_key, column_key=query.column_key
        )
        found += cells
        what.append(
            f"cell {query.row_key!r} x {query.column_key!r}" + ("" if cells else ": no such cell")
        )
    named = bool(found)  # cells named in the question's words
    # the page's tables, read once for the steps below
    read = tables.tables(lines, regions) if target in ("table_cell", "paragraph_fact") else []
    # keys the question did not name as such, or named in words no table holds (a key read
    # wrongly out of the question): the question's own words against the tables' keys
    if target in ("table_cell", "paragraph_fact") and not found:
        cells = _cells_by_words(query, read)
        found += cells
        what.append(f"cells whose row and column keys hold the question's words: {len(cells)}")
        named = bool(cells)
        if not cells:  # the row named in words, the column by what its header means
            cells = [c for t in read for c in t.cells_by_meaning(query.question, relevance)]
            found += cells
            what.append(f"cells of the row named x the column meant: {len(cells)}")
        if not cells and target == "table_cell" and by_meaning:  # neither key in its words
            meant_cells = [
                replace(c, kind=MEANT_CELL)
                for t in read
                for c in t.cells_meant(query.question, relevance)
            ]
            found += meant_cells
            what.append(f"cells of the row and column meant: {len(meant_cells)}")
    # a cell named in the question's words fits: no sentence; one whose column is only meant
    # leaves room for a sentence that holds the words ('停課' in a calendar's notes)
    if target == "paragraph_fact" and query.cues and not (found and named):
        kinds = _answer_kinds(query)
        sentences = [
            _with_value(f, lines, kinds)
            if any(spans.candidates(f.text, k) for k in kinds)
            or (cell := tables.with_cell_value(f, read)) is None
            else cell
            for f in paragraphs.sentence_with(lines, regions, phrase=_phrase(query), kinds=kinds)
        ]
        sentences = list({(f.text, f.boxes): f for f in sentences}.values())  # a cell once
        found += sentences
        what.append(f"sentence holding '{_phrase(query)}'" + ("" if sentences else ": none"))
        if by_meaning and relevance is not None and not sentences:
            # no sentence holds the question's words: the ones meaning it most, as leads
            seen = {(f.text, f.boxes) for f in found}
            meant_sentences = [
                f
                for f in paragraphs.sentences_meant(
                    lines, regions, question=query.question, relevance=relevance
                )
                if (f.text, f.boxes) not in seen
            ]
            found += meant_sentences
            what.append(f"sentences meaning the question most: {len(meant_sentences)}")
            if {"date", "weekday"} & set(kinds):  # no sentence tells when: the dateline may
                found += _datelines(lines)
    if target == "code_identifier":
        found += codeblocks.defined(lines, regions, query.code_kind)
        what.append(f"{query.code_kind or 'identifier'} definitions")
    return found, "; ".join(what)


def _wordings(query: Query) -> tuple[str, ...]:
    """The question, and its content words alone ('handbook off sick tell' for "which section of
    the handbook tells me what to do if I'm off sick?"): a heading is ranked by both, since the
    question's frame pulls its whole wording toward headings about the document itself. Words
    alone only where there are MIN_CUES of them: two bare words say too little."""
    if len(query.cues) < MIN_CUES:
        return (query.question,)
    return query.question, " ".join(query.cues)


def _answer_kinds(query: Query) -> tuple[str, ...]:
    """The span kinds an answer may be written as; a day is asked for by weekday or by date
    ("哪一天", "which day is the deadline?"); none for a text or a cell."""
    kind = SPAN_KINDS.get(query.answer_type)
    if kind == "weekday":
        return ("weekday", "date")
    return () if kind in (None, "text", "cell") else (kind,)


def _datelines(lines: Sequence[OcrLine], most: int = 2) -> list[Located]:
    """The `most` topmost lines of each page that are a date and nothing else (a report's or a
    letter's own date): what "when was it issued?" asks of a document whose text never says
    so. Sent as candidates (a date is no text meaning can rank), never a tool's answer."""
    out: list[Located] = []
    for page in structure.pages(lines):
        alone = [
            ln
            for ln in page.lines
            if (date := spans.candidates(ln.text, "date"))
            and len(date[0].text) >= 0.8 * len(ln.text.strip())
        ]
        out += [
            Located(ln.text, DATELINE, page.source_boxes([ln]), ln.media_index, ln.timestamp)
            for ln in alone[:most]
        ]
    return out


def _with_value(found: Located, lines: Sequence[OcrLine], kinds: Sequence[str]) -> Located:
    """A short line that holds the question's words but no answer is a form's label ("联系电话",
    "Seat"): it comes with the nearest line to its right on its row, its value."""
    if (
        len(found.boxes) != 1
        or structure.text_length(found.text, cjk_weight=0.5) > 4
        or any(spans.candidates(found.text, k) for k in kinds)
    ):
        return found
    box = found.boxes[0]
    row = [
        ln
        for ln in lines
        if (ln.media_index, ln.timestamp) == (found.media_index, found.timestamp)
        and box.x1 - 0.25 * box.height <= ln.box.x0 <= box.x1 + 10 * box.height
        and min(ln.box.y1, box.y1) - max(ln.box.y0, box.y0) >= 0.5 * min(ln.box.height, box.height)
    ]
    if not row:
        return found
    value = min(row, key=lambda ln: ln.box.x0)
    return Located(
        f"{found.text} {value.text}",
        found.kind,
        (box, value.box),
        found.media_index,
        found.timestamp,
        found.score,
    )


def _tallest_lines(lines: list[OcrLine], regions: list[LayoutRegion]) -> list[Located]:
    """Per page, the (at most 3) short lines nearly as tall as the tallest short line that heads
    text on the page (`headings.heads_text`, `headings.off_page`; any short line when none
    does): where a title is when the page's
    structure cannot be read (recall first: all are candidates). Short lines only: on a page
    photographed at an angle a long line's box is tall because it slants."""
    out = []
    for page in structure.pages(lines, regions):
        short = [ln for ln in page.lines if 1 <= structure.text_length(ln.text) <= 8]
        # a line with text right under it, not a photo's own big word beside the page
        short = [
            ln
            for ln in short
            if headings.heads_text(page, ln.box) and not headings.off_page(page, ln)
        ] or short
        tall = sorted(short, key=lambda ln: -ln.box.height)
        top = tall[0].box.height if tall else 0
        out += [
            Located(
                ln.text,
                "tall line",
                (ln.box,),
                page.media_index,
                page.timestamp,
                ln.box.height / top,
            )
            for ln in tall[:3]
            if ln.box.height >= 0.8 * top
        ]
    return out


def _word_runs(query: Query) -> list[str]:
    """Phrases of 1-3 consecutive cue words, in the question's order ("When does Express 12 leave
    Leeds?" -> 'express', 'express 12', '12', '12 leave', 'leeds' ...)."""
    tokens = (
        [singular(w.lower()) for w in _cue_words(query)]
        if query.language != "zh"
        else list(query.cues)
    )
    return list(
        dict.fromkeys(
            " ".join(tokens[i : i + n]) for n in (1, 2, 3) for i in range(len(tokens) - n + 1)
        )
    )


def _cells_by_words(query: Query, read: Sequence[tables.Table]) -> list[tables.Cell]:
    """Cells whose row key and column key both hold words of the question, when the question
    does not name them as such ("When does Express 12 leave Leeds?"): the pairs of phrases that
    cover the most question words, every cell they fit (recall first)."""
    runs = _word_runs(query)
    if len(runs) < 2:
        return []
    best: list[tables.Cell] = []
    best_cover = 0
    for table in read:
        for row_key in runs:
            for column_key in runs:
                if set(row_key.split()) & set(column_key.split()):
                    continue
                cover = len(row_key.split()) + len(column_key.split())
                if cover < best_cover:
                    continue
                cells = [
                    c
                    for c in table.cells_for(row_key, column_key)
                    if _worded(c, f"{row_key} {column_key}")
                ]
                if cells:
                    best = cells if cover > best_cover else best + cells
                    best_cover = cover
    return list({cell.boxes: cell for cell in best}.values())  # one per cell, however named


def _worded(cell: tables.Cell, keys: str) -> bool:
    """Does a word of the question's `keys` name the cell? Numbers and lone characters alone
    ('10', '16', '日' against a calendar's '10' x '16日: ...') are the question's date, not what
    it asks about."""
    held = words(f"{cell.row_key} {cell.column_key}")
    return any(
        len(w) > 1 and not w.isdigit() and any(same_word(w, h) for h in held) for w in words(keys)
    )


# the kinds sent to the VLM and never answered, and why
_LEADS = {
    SENTENCE_MEANT: "it only means what the question asks",
    MARGIN: "a page margin the question means",
    MEANT_CELL: "its row and column keys only mean the question's",
    LEAD: "the question's other reading found it",
    DATELINE: "a date alone on its line, no sentence says when",
    headings.LEAD_HEADING: "it heads the text meant, or looks like a heading",
}


def answer_span(query: Query, found: Sequence[Located]) -> tuple[str | None, str]:
    """(the exact answer, why) from what `located_for` found; (None, why) to abstain."""
    if not found:
        return None, "the document structure holds nothing the question names"
    texts: dict[str, Located] = {}
    for f in found:  # a text found both ways is the first reading's
        texts.setdefault(norm_text(f.text), f)
    if len(texts) > 1:
        return None, f"{len(texts)} different candidates: " + ", ".join(
            f"'{f.text}'" for f in list(texts.values())[:4]
        )
    best = next(iter(texts.values()))
    if best.kind == "tall line":  # a guess at where a title is: a lead for the VLM only
        return None, f"no title structure; the tallest line '{best.text}' is only a lead"
    if best.kind == "unsure definition":
        return None, f"'{best.text}' is read with spaces for underscores and written nowhere else"
    if best.kind == "any heading":
        return None, f"the section asked for was not found; '{best.text}' is only a lead"
    if best.kind in _LEADS:
        return None, f"'{best.text}' is a lead: {_LEADS[best.kind]}"
    if best.kind == "sentence" and best.score < 1.0:  # the tool needs every word of the question
        return (
            None,
            f"the sentence '{best.text}' holds only {best.score:.0%} of the question's words",
        )
    if query.target == "heading" and isinstance(best, headings.Heading) and best.name:
        return best.name.strip(), "one heading (its name, without the number)"
    kind = SPAN_KINDS.get(query.answer_type)
    if best.kind == "cell" and (
        kind in ("amount", "number", "id", "date", "time")
        and not re.search(r"\d", best.text)
        or kind == "weekday"
        and not spans.candidates(best.text, kind)
    ):
        # a fact question's words matched a cell ("how much will it cost?"): it must hold a
        # value of the kind (a figure for an amount, a day for 'which day')
        return None, f"the cell '{best.text}' holds no {query.answer_type}"
    if (
        best.kind == "cell"
        and kind in FIGURES
        and len({(c.start, c.end) for k in FIGURES for c in spans.candidates(best.text, k)}) > 1
    ):
        # '242 (42.756%)' for a percentage: the cell is not the one value asked for
        return None, f"the cell '{best.text}' holds several {query.answer_type} values"
    if query.target in ("title", "heading", "code_identifier") or best.kind == "cell":
        return best.text.strip(), f"one {best.kind}"
    if kind is None or kind == "text":
        return None, f"the {best.kind} '{best.text}' is not a span of its own"
    span = spans.exact_span(best.text, kind)
    if span is None:
        return None, f"no single {query.answer_type} in the {best.kind} '{best.text}'"
    return span.text, f"the {query.answer_type} in one {best.kind}"
