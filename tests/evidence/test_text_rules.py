"""The rules under the structure readers, on constructed text and lines: section numbers, key
matching that is exact about digits, sentences, code definitions, tables without a header, and a
page turned at an angle read level."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from cascade.artifacts import Box, OcrLine
from cascade.evidence import codeblocks, headings, paragraphs, tables
from cascade.evidence.codeblocks import definition_in
from cascade.evidence.numbering import parse_number, split_numbering
from cascade.evidence.structure import pages
from cascade.evidence.textmatch import CONTAINED, EXACT, key_match, phrase_score


@pytest.mark.parametrize(
    "text,number,rest",
    [
        ("3. Service Changes", (3,), "Service Changes"),
        ("3.2 Results", (3, 2), "Results"),
        ("Section 3: Scope", (3,), "Scope"),
        ("Chapter III Methods", (3,), "Methods"),
        ("Part Two - Data", (2,), "Data"),
        ("§ 4.1 Terms", (4, 1), "Terms"),
        ("第三章 概述", (3,), "概述"),
        ("第12节", (12,), ""),
        ("三、服务变更", (3,), "服务变更"),
        ("（二）客流统计", (2,), "客流统计"),
        ("十二、附录", (12,), "附录"),
        ("(iv) Scope", (4,), "Scope"),
    ],
)
def test_section_numbers(text, number, rest):
    assert split_numbering(text) == (number, rest)


@pytest.mark.parametrize(
    "text",
    [
        "2 apples were sold",
        "1200",
        "12.50 13.00",
        "Overview",
        "I am here",
        "Part of the plan",
        "Intro 3",
    ],
)
def test_not_section_numbers(text):
    assert split_numbering(text) is None


def test_numbers_written_alone():
    assert [parse_number(t) for t in ("3", "3.2", "III", "three", "三", "二十一", "door")] == [
        (3,),
        (3, 2),
        (3,),
        (3,),
        (3,),
        (21,),
        None,
    ]


@pytest.mark.parametrize(
    "key,text,fits",
    [
        ("Blue", "Blue", EXACT),
        ("blue", "Blue line", CONTAINED),
        ("2023", "FY 2023", CONTAINED),
        ("Line 2", "Line 21", 0),
        ("Line 2", "Line 3", 0),
        ("Q1", "Q2", 0),
        ("Total", "Subtotal", 0),
        ("February 2024", "February", 0),
        ("蓝线", "红线", 0),
        ("2月", "12月", 0),
        ("停课", "本日停課一日", CONTAINED),  # a simplified question, a traditional page
        ("行事历", "行事曆", EXACT),
        ("课程", "課表", 0),
    ],
)
def test_keys_match_fuzzily_but_exactly_about_digits(key, text, fits):
    assert key_match(key, text) == fits


def test_fuzzy_and_abbreviated_keys_rank_below_exact_ones():
    assert 0 < key_match("Febuary", "February") < key_match("Feb", "February") < CONTAINED
    assert (
        key_match("总计", "总计金额") == CONTAINED
        and phrase_score("东入口关闭", "东入口将于周二关闭") > 0.5
    )


def L(text, x0, y0, x1, y1, media_index=0, angle=0.0):
    return OcrLine(text, 0.99, Box(x0, y0, x1, y1), media_index, None, angle)


def test_key_value_rows_are_a_table_without_header():
    lines = [
        L("Subtotal", 40, 400, 160, 424),
        L("10.00", 400, 400, 470, 424),
        L("Tax", 40, 440, 90, 464),
        L("2.50", 400, 440, 460, 464),
        L("Total", 40, 480, 110, 504),
        L("12.50", 400, 480, 470, 504),
    ]
    (table,) = tables.tables(lines)
    assert table.header_row is None and table.key_column == 0
    assert table.cell("Total").text == "12.50"  # one value column: no column key needed
    assert table.cell("tax").text == "2.50"
    assert table.cell("Discount") is None


def test_sentences_split_on_both_scripts_not_on_abbreviations():
    text = "Dr. Smith met J. R. Doe at 3.5 p.m. on Jan. 5. Then he left! 它很好。好的！"
    assert [text[s:e] for s, e in paragraphs.split_sentences(text)] == [
        "Dr. Smith met J. R. Doe at 3.5 p.m. on Jan. 5.",
        "Then he left!",
        "它很好。",
        "好的！",
    ]


def test_wrapped_lines_join_as_the_script_wants():
    lines = [
        L("The new timetable starts in the sum-", 40, 100, 600, 130),
        L("mer and runs until the autumn.", 40, 136, 520, 166),
        L("新的时刻表将于", 40, 300, 300, 330),
        L("夏季开始实行。", 40, 336, 300, 366),
    ]
    texts = [p.text for p in paragraphs.paragraphs(lines)]
    assert texts == [
        "The new timetable starts in the summer and runs until the autumn.",
        "新的时刻表将于夏季开始实行。",
    ]


@pytest.mark.parametrize(
    "code,found",
    [
        ("return compute(x);", None),
        ("new Foo(bar);", None),
        ("if (x > 0) {", None),
        ("x = foo(y)", None),
        ("} else if (y) {", None),
        ("print('hello')", None),
        ("The class Foo handles orders.", None),
        ("See the results (table 3)", None),
        ("impl Display for Matrix {", None),
        ("async def fetch(url, *, timeout=3):", ("fetch", "function")),
        ("std::vector<int> Graph::neighbours(int v) const {", ("neighbours", "function")),
        (
            "public static String formatName(String first, String last) {",
            ("formatName", "function"),
        ),
        ("fun greet(name: String): String {", ("greet", "function")),
        ("type Handler = (req: Request) => void;", ("Handler", "type")),
        ("pub struct Matrix {", ("Matrix", "struct")),
        ("enum Color { RED, GREEN }", ("Color", "enum")),
        ("create or replace view active_users as", ("active_users", "view")),
        ("const MAX_RETRIES = 5;", ("MAX_RETRIES", "variable")),
        ("5 def count_header(source, path=None):", ("count_header", "function")),  # line number
        ("12: function foo() {", ("foo", "function")),
        ("2 from pathlib import Path", None),
        ("12. def f(x):", ("f", "function")),
        ("7 | class Foo:", ("Foo", "class")),
    ],
)
def test_definitions_not_calls(code, found):
    assert definition_in(code) == found


def turned(lines: list[OcrLine], degrees: float) -> list[OcrLine]:
    """The upright boxes the lines would have on a page turned anticlockwise by `degrees`."""
    t = math.radians(degrees)
    out = []
    for ln in lines:
        b, cx, cy = ln.box, 600.0, 400.0
        corners = [(x - cx, y - cy) for x in (b.x0, b.x1) for y in (b.y0, b.y1)]
        pts = [
            (cx + x * math.cos(t) + y * math.sin(t), cy - x * math.sin(t) + y * math.cos(t))
            for x, y in corners
        ]
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        out.append(L(ln.text, min(xs), min(ys), max(xs), max(ys), angle=degrees))
    return out


def test_a_turned_page_is_read_level_and_reported_where_it_is():
    level = [
        L("Fleet Report", 300, 100, 700, 150),
        L("1. Buses", 100, 200, 260, 232),
        L("The depot holds forty buses and six coaches in winter.", 100, 250, 900, 276),
        L("Most of them run on the airport routes every day.", 100, 282, 860, 308),
        L("Type", 100, 350, 200, 376),
        L("Seats", 400, 350, 500, 376),
        L("Bus", 100, 390, 170, 416),
        L("52", 400, 390, 440, 416),
        L("Coach", 100, 430, 200, 456),
        L("49", 400, 430, 440, 456),
    ]
    page_lines = turned(level, 5)
    (page,) = pages(page_lines)
    assert page.skew == pytest.approx(5)
    (title,) = headings.document_title(page_lines)
    assert title.text == "Fleet Report" and title.box == page_lines[0].box
    (cell,) = tables.table_cell(page_lines, row_key="Coach", column_key="Seats")
    assert cell.text == "49" and cell.boxes[0] == page_lines[-1].box
    assert tables.table_cell(turned(level, 0), row_key="Coach", column_key="Seats")[0].text == "49"


def test_a_photos_own_big_words_are_not_the_title_of_the_page_in_it():
    page = [
        L("Fleet Report", 300, 100, 700, 150),
        L("1. Buses", 100, 200, 260, 232),
        L("The depot holds forty buses and six coaches in winter.", 100, 250, 900, 276),
        L("Most of them run on the airport routes every day.", 100, 282, 860, 308),
        L("2. Coaches", 100, 340, 280, 372),
        L("Six coaches serve the airport.", 100, 390, 600, 416),
    ]
    # level: a big word far right of the page heads no text of it; the tallest lines are the
    # page's title when the page's headings cannot be scored
    beside = [L("CERO", 1300, 40, 1560, 130), L("47", 1400, 600, 1500, 700)]
    (title,) = headings.document_title(page + beside)
    assert title.text == "Fleet Report"
    # turned: the photo's own words stay level while the page's lines lie at 8 degrees
    photo = turned(page, 8) + [L("CERO", 1000, 150, 1260, 240), L("EXIT", 40, 20, 300, 110)]
    (title,) = headings.document_title(photo)
    assert title.text == "Fleet Report"
    (read_level,) = pages(photo)
    assert {ln.text for ln in read_level.lines if headings.off_page(read_level, ln)} == {
        "CERO",
        "EXIT",
    }


def test_code_read_in_pieces_is_one_line():
    """OCR may read 'def' and the rest of the line as two boxes, and a margin's line numbers."""
    lines = [
        L("1", 40, 20, 56, 44),
        L("import os", 100, 20, 230, 44),
        L("2", 40, 52, 56, 76),
        L("def", 100, 52, 150, 76),
        L("resize_profile(name, count=None):", 146, 52, 560, 76),
        L("3", 40, 84, 56, 108),
        L("return count or 0", 150, 84, 380, 108),
    ]
    (found,) = codeblocks.defined(lines, kind="function")
    assert (found.text, found.what) == ("resize_profile", "function")
    assert found.line == "def resize_profile(name, count=None):" and len(found.boxes) == 2


def test_cells_a_question_names_without_keys_picked_out():
    lines = [
        L("Train", 40, 100, 120, 124),
        L("Central", 300, 100, 420, 124),
        L("Mill Lane", 500, 100, 640, 124),
        L("Train 101", 40, 140, 170, 164),
        L("08:02", 300, 140, 380, 164),
        L("08:15", 500, 140, 580, 164),
        L("Train 107", 40, 180, 170, 204),
        L("08:24", 300, 180, 380, 204),
        L("10:19", 500, 180, 580, 204),
    ]
    (cell,) = tables.cells_named_in(lines, question="When does Train 107 leave Mill Lane?")
    assert (cell.text, cell.row_key, cell.column_key) == ("10:19", "Train 107", "Mill Lane")
    assert tables.cells_named_in(lines, question="When does Train 103 leave Central?") == []
    assert {
        c.text for c in tables.cells_named_in(lines, question="When does the train leave Central?")
    } == set()  # no row named


def test_a_date_in_the_question_names_no_cell_of_a_calendar():
    """The question "10月16日为什么停课?" holds a calendar's month row '10' and a note column
    headed '16日: ...': numbers and lone characters are its date, not the row and column it asks
    about."""
    from cascade.evidence.documents import _worded

    cell = tables.Cell("29日：期中考試", "cell", (), row_key="10", column_key="16日：醫院週年慶")
    assert not _worded(cell, "10 16 停课 日 月")
    assert _worded(cell, "10 医院")  # a word of the question names the column (traditional)
    assert _worded(replace(cell, row_key="Oct"), "oct 16")


def test_title_over_numbered_sections_when_the_body_was_not_read():
    """Small body text OCR missed leaves only the headings: the largest unnumbered line above
    the numbered sections is still the title candidate (not the running header)."""
    lines = [
        L("Blue Harbor Supplies | internal", 700, 20, 900, 34),
        L("Office Policies", 380, 60, 620, 100),
        L("Revision 8.5, 2023", 420, 108, 580, 124),
        L("1 Meeting Rooms", 60, 160, 300, 190),
        L("2 Quiet Areas", 60, 260, 260, 290),
        L("3 Kitchen Etiquette", 60, 360, 330, 390),
    ]
    (title,) = headings.document_title(lines)
    assert title.text == "Office Policies"
    assert headings.document_title(lines[:2] + lines[3:4]) == []  # one numbered line: no rule
