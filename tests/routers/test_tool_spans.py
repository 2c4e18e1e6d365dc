"""A tool answer is the answer, not the line: the identifier, the day, the id, the cell; or the
tool abstains and hands the lines to the VLM."""

import pytest

from cascade import Box, OcrLine
from cascade.evidence.understanding import understand
from cascade.registry import get_stage_class


def line(text: str, x: float, y: float, w: float | None = None, h: float = 20) -> OcrLine:
    return OcrLine(text, 0.97, Box(x, y, x + (w or 11 * len(text)), y + h))


def ask(question: str, lines: list[OcrLine], **params):
    return get_stage_class("tool_answer")(params)(query=understand(question), ocr_lines=lines)


CODE = [
    line("import os", 20, 20),
    line("", 20, 45),
    line("def load_config(path):", 20, 70),
    line("    with open(path) as f:", 20, 95),
    line("        return f.read()", 20, 120),
    line("print(load_config('a.yml'))", 20, 145),
]
NOTICE = [
    line("Visitor notice", 20, 20, h=30),
    line("The museum is open every day from 9:00 to 17:00.", 20, 70),
    line("The east entrance will be closed on Thursday for repairs.", 20, 95),
    line("Guided tours start at 11:00.", 20, 120),
]
INVOICE = [
    line("ACME SUPPLY CO.", 20, 20),
    line("Phone 555-0142", 400, 20),
    line("Invoice Number", 20, 70),
    line("Invoice Date", 300, 70),
    line("INV-20931", 20, 95),
    line("13 Jun 2022", 300, 95),
    line("Total due", 300, 200),
    line("$36.13", 450, 200),
]
TIMETABLE = [
    line("Train", 20, 20),
    line("Dep.", 200, 20),
    line("Arr.", 320, 20),
    line("Express 12", 20, 50),
    line("08:15", 200, 50),
    line("09:40", 320, 50),
    line("Local 7", 20, 80),
    line("08:30", 200, 80),
    line("10:05", 320, 80),
    line("Express 21", 20, 110),
    line("09:15", 200, 110),
    line("10:30", 320, 110),
]


@pytest.mark.parametrize(
    "question,lines,answer",
    [
        ("What is the name of the function that this code defines?", CODE, "load_config"),
        ("这段代码定义的函数名是什么？", CODE, "load_config"),
        ("On which day will the east entrance be closed?", NOTICE, "Thursday"),
        ("What time do guided tours start?", NOTICE, "11:00"),
        ("What is the invoice number?", INVOICE, "INV-20931"),
        ("What is the Dep. of Express 12 in the table?", TIMETABLE, "08:15"),
        ("In the table, what is the Arr. of Local 7?", TIMETABLE, "10:05"),
    ],
)
def test_the_tool_answers_the_exact_span(question, lines, answer):
    out = ask(question, lines)
    assert out.route.branch == "tool", out.route.reason
    assert out.answer.text == answer and out.answer.produced_by == "tool"


@pytest.mark.parametrize(
    "question,lines,why",
    [
        # the sentence holds two times: no single span, abstain
        ("When is the museum open?", NOTICE, "no single when"),
        # 'Express' alone fits two rows: several cells
        ("What is the Dep. of Express in the table?", TIMETABLE, "different candidates"),
        # no definition on the page
        (
            "What is the name of the function that this code defines?",
            NOTICE,
            "nothing the question",
        ),
        # a sentence with some of the question's words is a lead for the VLM, not an answer
        ("On which day does the library close?", NOTICE, "holds only 50%"),
    ],
)
def test_the_tool_abstains_and_hands_the_lines_to_the_vlm(question, lines, why):
    out = ask(question, lines)
    assert out.answer is None and out.route.branch == "vlm"
    assert why in out.route.reason and out.hint.startswith("Tools found:")


def test_a_sign_question_asking_for_a_number_gets_the_number_not_the_sign():
    sign = [line("GATE 12", 100, 100)]
    assert ask("Which gate number does the sign show?", sign).answer.text == "12"
    out = ask("Which gate number does the sign show?", [line("GATE 12 TO 14", 100, 100)])
    assert out.answer is None and "no single number" in out.route.reason
