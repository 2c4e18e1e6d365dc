"""Where a document holds the answer to a `Query`, and the exact span a tool may answer with.

`located_for` asks the structure reader the query's target names (`headings`, `tables`,
`paragraphs`, `codeblocks`) and returns **every** plausible region, best first (recall first: a
caller that sends crops sends them all). `answer_span` is the tool's side: one distinct text, then
the exact span of the answer type inside it (`spans.exact_span`), or None with the reason
(precision first: several candidates, or no single span of that type, abstain).
"""
from __future__ import annotations

from collections.abc import Sequence

from cascade.artifacts import LayoutRegion, OcrLine

from . import codeblocks, headings, paragraphs, spans, tables
from .blocks import norm_text
from .query import Query
from .structure import Located

__all__ = ["located_for", "answer_span", "SPAN_KINDS"]

# Query answer types -> span kinds (`spans.KINDS`); a whole heading or title is `text`.
SPAN_KINDS = {"day": "weekday", "date": "date", "time": "time", "when": "when",
              "amount": "amount", "id": "id", "identifier": "identifier", "number": "number",
              "cell": "cell", "text": "text"}


def _phrase(query: Query) -> str:
    return " ".join(query.cues)


def located_for(query: Query, lines: Sequence[OcrLine],
                regions: Sequence[LayoutRegion] = ()) -> tuple[list[Located], str]:
    """(the regions that may hold the answer, best first; what was looked for). Empty when the
    target is not a document's, or nothing fits."""
    lines, regions = list(lines), list(regions)
    if not lines:
        return [], "no text"
    target = query.target
    if target == "title":
        return list(headings.document_title(lines, regions)), "title candidates"
    if target == "heading":
        if query.section_number:
            found = headings.section_heading(lines, regions, number=query.section_number)
            what = f"heading of section {query.section_number}"
        elif query.section_name:
            found = headings.section_heading(lines, regions, topic=query.section_name)
            what = f"heading of the section about '{query.section_name}'"
        else:
            found, what = [], "section heading"
        return (list(found) or list(headings.headings(lines, regions)),
                what if found else f"{what}: not found, every heading")
    found: list[Located] = []
    what = []
    if query.row_key and query.column_key:
        cells = tables.table_cell(lines, regions, row_key=query.row_key,
                                  column_key=query.column_key)
        found += cells
        what.append(f"cell {query.row_key!r} x {query.column_key!r}" + ("" if cells else
                                                                        ": no such cell"))
    if target == "paragraph_fact" and query.cues:
        sentences = paragraphs.sentence_with(lines, regions, phrase=_phrase(query))
        found += sentences
        what.append(f"sentence holding '{_phrase(query)}'" + ("" if sentences else ": none"))
    if target == "code_identifier":
        found += codeblocks.defined(lines, regions, query.code_kind)
        what.append(f"{query.code_kind or 'identifier'} definitions")
    return found, "; ".join(what)


def answer_span(query: Query, found: Sequence[Located]) -> tuple[str | None, str]:
    """(the exact answer, why) from what `located_for` found; (None, why) to abstain."""
    if not found:
        return None, "the document structure holds nothing the question names"
    texts = {norm_text(f.text): f for f in found}
    if len(texts) > 1:
        return None, f"{len(texts)} different candidates: " + ", ".join(
            f"'{f.text}'" for f in list(texts.values())[:4])
    best = next(iter(texts.values()))
    if best.kind == "sentence" and best.score < 1.0:  # the tool needs every word of the question
        return None, f"the sentence '{best.text}' holds only {best.score:.0%} of the question's words"
    if query.target in ("title", "heading", "code_identifier") or best.kind == "cell":
        return best.text.strip(), f"one {best.kind}"
    kind = SPAN_KINDS.get(query.answer_type)
    if kind is None or kind == "text":
        return None, f"the {best.kind} '{best.text}' is not a span of its own"
    span = spans.exact_span(best.text, kind)
    if span is None:
        return None, f"no single {query.answer_type} in the {best.kind} '{best.text}'"
    return span.text, f"the {query.answer_type} in one {best.kind}"
