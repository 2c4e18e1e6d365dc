"""Tools answer when sure (one plausible text block, the value of a named key, a count) and
otherwise abstain with a hint: right or silent."""

import numpy as np
import pytest

from cascade import Box, Detection, Image, OcrLine
from cascade.evidence.understanding import understand
from cascade.registry import get_stage_class

FRAME = Image(np.zeros((720, 1280, 3), np.uint8))
SIGN = [
    OcrLine("PIER 32N", 0.95, Box(100, 100, 200, 120)),
    OcrLine("NO PARKING", 0.93, Box(100, 122, 210, 142)),
]
DETS = [Detection("person", 0.9, Box(0, 0, 10, 10), timestamp=t) for t in (1.0, 1.0, 1.0, 2.0)] + [
    Detection("bus", 0.95, Box(0, 0, 100, 100), timestamp=1.0)
]


def tool(**params):
    return get_stage_class("tool_answer")(params)


def test_reads_the_whole_block_of_one_sign():
    out = tool().run(query=understand("What does the sign say?"), ocr_lines=SIGN, images=[FRAME])
    assert out.route.branch == "tool" and out.answer.text == "PIER 32N NO PARKING"
    assert out.answer.produced_by == "tool" and out.answer.usage["visual_tokens"] == 0
    assert len(out.answer.evidence.ocr_lines) == 2


def test_two_texts_abstain_unless_the_question_names_one():
    lines = SIGN + [OcrLine("CH 5", 0.99, Box(10, 10, 50, 30))]
    out = tool().run(query=understand("What does the sign say?"), ocr_lines=lines, images=[FRAME])
    assert out.route.branch == "vlm" and out.answer is None
    assert "2 different texts" in out.route.reason and "'PIER 32N NO PARKING'" in out.hint
    named = tool().run(
        query=understand("Which pier is on the sign?"), ocr_lines=lines, images=[FRAME]
    )
    assert named.answer.text == "PIER 32N NO PARKING"


@pytest.mark.parametrize(
    "line,why",
    [
        (OcrLine("尚", 0.92, Box(0, 0, 1280, 720)), "1 letter(s)/digit(s)"),
        (
            OcrLine("尚品宅配", 0.95, Box(300, 300, 400, 330)),
            "not in the question's (Latin) script",
        ),
        (OcrLine("TEXTURE", 0.95, Box(0, 100, 1270, 700)), "spans the whole frame"),
        (OcrLine("PIER 32N", 0.6, Box(100, 100, 200, 120)), "confidence 0.60 < 0.8"),
    ],
)
def test_implausible_reads_are_not_answers(line, why):
    out = tool().run(query=understand("What does the sign say?"), ocr_lines=[line], images=[FRAME])
    assert out.answer is None and out.route.branch == "vlm" and why in out.route.reason


def test_the_total_is_the_amount_next_to_total_not_the_label_subtotal_or_tax():
    lines = [
        OcrLine("SUBTOTAL", 0.99, Box(20, 400, 120, 420)),
        OcrLine("7.00", 0.99, Box(420, 400, 470, 420)),
        OcrLine("TAX", 0.99, Box(20, 420, 60, 440)),
        OcrLine("0.75", 0.99, Box(420, 420, 470, 440)),
        OcrLine("TOTAL", 0.99, Box(20, 440, 90, 460)),
        OcrLine("7.75", 0.99, Box(420, 440, 470, 460)),
    ]
    out = tool().run(query=understand("What is the total on the receipt?"), ocr_lines=lines)
    assert out.answer.text == "7.75" and "key 'TOTAL'" in out.route.reason
    assert (
        tool().run(query=understand("How much tax was paid?"), ocr_lines=lines).answer.text
        == "0.75"
    )
    assert (
        tool().run(query=understand("What is the subtotal?"), ocr_lines=lines).answer.text == "7.00"
    )


@pytest.mark.parametrize(
    "lines,question,value",
    [
        (
            [
                OcrLine("Invoice Number", 0.99, Box(0, 0, 150, 20)),
                OcrLine("Invoice Date", 0.99, Box(300, 0, 420, 20)),
                OcrLine("INV-20931", 0.99, Box(0, 30, 110, 50)),
                OcrLine("13 Jun 2022", 0.99, Box(300, 30, 420, 50)),
            ],
            "What is the invoice number?",
            "INV-20931",
        ),
        (
            [
                OcrLine("Invoice Number", 0.99, Box(0, 0, 150, 20)),
                OcrLine("Invoice Date", 0.99, Box(300, 0, 420, 20)),
                OcrLine("INV-20931", 0.99, Box(0, 30, 110, 50)),
                OcrLine("13 Jun 2022", 0.99, Box(300, 30, 420, 50)),
            ],
            "What is the date on the invoice?",
            "13 Jun 2022",
        ),
        (
            [
                OcrLine("Order # 48213", 0.99, Box(0, 0, 150, 20)),
                OcrLine("03/18/2024", 0.99, Box(300, 0, 420, 20)),
            ],
            "What is the order number?",
            "48213",
        ),
        ([OcrLine("Total: 36.13", 0.99, Box(0, 0, 150, 20))], "What is the total amount?", "36.13"),
        # a bill's total printed as what is left to pay, asked as what is owed
        (
            [
                OcrLine("Cash 20.00", 0.99, Box(0, 0, 150, 20)),
                OcrLine("BALANCE 12.40", 0.99, Box(0, 30, 150, 50)),
            ],
            "How much is still owed on this bill?",
            "12.40",
        ),
        (
            [
                OcrLine("Amount payable", 0.99, Box(0, 0, 150, 20)),
                OcrLine("$ 88.15", 0.99, Box(300, 0, 420, 20)),
            ],
            "How much is due on the slip?",
            "$ 88.15",
        ),
    ],
)
def test_key_value_layouts(lines, question, value):
    assert tool().run(query=understand(question), ocr_lines=lines).answer.text == value


LETTER = [
    OcrLine("Invoice No: INV-30417", 0.99, Box(0, 0, 220, 20)),
    OcrLine("P.O. Number: 7781-204", 0.99, Box(0, 30, 220, 50)),
    OcrLine("Account No: 55-0193", 0.99, Box(0, 60, 220, 80)),
    OcrLine("Tel: +1 555 201 3344", 0.99, Box(0, 90, 220, 110)),
]


@pytest.mark.parametrize(
    "question,value",
    [
        ("What is the PO number?", "7781-204"),
        ("Which purchase order number is quoted?", "7781-204"),
        ("采购订单号是多少？", "7781-204"),
        ("What is the invoice number?", "INV-30417"),
        ("账号是多少？", "55-0193"),
    ],
)
def test_a_named_key_among_several_numbers_gets_its_own_value(question, value):
    out = tool().run(query=understand(question), ocr_lines=LETTER)
    assert out.answer.text == value and "OCR read key" in out.route.reason


@pytest.mark.parametrize("question", ["What is the order number?", "订单号是多少？"])
def test_a_named_key_the_page_does_not_name_abstains_rather_than_answer_another(question):
    out = tool().run(query=understand(question), ocr_lines=LETTER)
    assert out.answer is None and "no key names the order number" in out.route.reason
    assert "INV-30417" in out.hint and "7781-204" in out.hint  # the VLM gets the lines
    plain = [OcrLine("No. 77120", 0.99, Box(0, 0, 150, 20))]  # a key naming nothing: a receipt's
    assert tool().run(query=understand(question), ocr_lines=plain).answer.text == "77120"


TICKET = [
    OcrLine("TICKET NO. 8812093", 0.99, Box(0, 0, 220, 20)),
    OcrLine("Seat", 0.99, Box(0, 30, 60, 50)),
    OcrLine("14C", 0.99, Box(120, 30, 160, 50)),
    OcrLine("Order No. 55-0193", 0.99, Box(0, 60, 220, 80)),
]


@pytest.mark.parametrize(
    "question,value",
    [
        ("What is the seat number on this ticket?", "14C"),  # the seat's, not the ticket's number
        ("What is the order number on this receipt?", "55-0193"),  # the order's, not the receipt's
        ("What is the ticket number?", "8812093"),
    ],
)
def test_the_noun_right_before_number_names_the_field(question, value):
    assert tool().run(query=understand(question), ocr_lines=TICKET).answer.text == value


def test_a_field_the_page_does_not_label_abstains_rather_than_answer_another_number():
    out = tool().run(query=understand("What is the gate number on this ticket?"), ocr_lines=TICKET)
    assert out.answer is None


@pytest.mark.parametrize(
    "line,question,value",
    [
        ("Account No: 2231 9920 1184", "What is the account number?", "2231 9920 1184"),
        ("账号：6222 0210 0112", "账号是多少？", "6222 0210 0112"),
        ("Phone No.: +1 555 201 3344", "What is the phone number?", "+1 555 201 3344"),
        (
            "Account No (IBAN): DE89 3704 0044 0532 0130 00",
            "What is the account number?",
            "DE89 3704 0044 0532 0130 00",
        ),
    ],
)
def test_an_id_printed_in_groups_is_answered_whole_not_its_first_group(line, question, value):
    out = tool().run(
        query=understand(question), ocr_lines=[OcrLine(line, 0.99, Box(0, 0, 300, 20))]
    )
    assert out.answer.text == value


def test_a_key_noun_alone_before_its_value_is_the_key():
    lines = [
        OcrLine("PO: 4500123", 0.99, Box(0, 0, 150, 20)),
        OcrLine("Invoice # 88120", 0.99, Box(0, 30, 150, 50)),
        OcrLine("P.O. Box 1180", 0.99, Box(0, 60, 150, 80)),
    ]  # an address, not the PO
    assert (
        tool().run(query=understand("What's the P.O. number?"), ocr_lines=lines).answer.text
        == "4500123"
    )


def test_disagreeing_values_abstain():
    lines = [
        OcrLine("TOTAL 7.75", 0.99, Box(0, 0, 150, 20)),
        OcrLine("TOTAL 9.10", 0.99, Box(0, 300, 150, 320)),
    ]
    out = tool().run(query=understand("What is the total?"), ocr_lines=lines)
    assert out.answer is None and "2 different values" in out.route.reason and "7.75" in out.hint


def test_a_key_over_a_column_of_values_is_a_tables_header_not_a_fields_label():
    """'Seal no.' heads a manifest's column: the value under it is the first row's, not the one
    for the container the question names. The tool abstains rather than answer it."""
    lines = [
        OcrLine("Container", 0.99, Box(40, 100, 160, 120)),
        OcrLine("Seal no.", 0.99, Box(300, 100, 390, 120)),
        OcrLine("MSKU 481220-7 (furniture)", 0.99, Box(40, 130, 280, 150)),
        OcrLine("PL0093317", 0.99, Box(300, 130, 400, 150)),
        OcrLine("TGHU 902113-4 (floor tiles)", 0.99, Box(40, 160, 290, 180)),
        OcrLine("PL0093341", 0.99, Box(300, 160, 400, 180)),
    ]
    query = understand("What seal number is on the container carrying the floor tiles?")
    out = tool().run(query=query, ocr_lines=lines)
    assert out.answer is None, out.route.reason


def test_counts_what_the_question_names_in_the_busiest_frame():
    out = tool().run(query=understand("How many people are there?"), detections=DETS)
    assert out.answer.text == "3" and "detector counted 3 person" in out.route.reason
    buses = [d for d in DETS if d.label == "bus"]
    none = tool().run(query=understand("How many people are by the bus?"), detections=buses)
    assert none.route.branch == "vlm" and none.answer is None


def test_hint_mode_and_low_confidence_go_to_the_vlm():
    hint = tool(mode="hint").run(query=understand("How many people?"), detections=DETS)
    assert hint.route.branch == "vlm" and hint.answer is None
    assert hint.hint == "detector counted 3 person: 3"
    unsure = tool(min_confidence=0.99).run(query=understand("How many people?"), detections=DETS)
    assert unsure.route.branch == "vlm" and "confidence 0.90 < 0.99" in unsure.route.reason


def test_scene_questions_are_not_for_tools():
    out = tool().run(
        query=understand("What is the mood of this scene?"), ocr_lines=SIGN, detections=DETS
    )
    assert out.route.branch == "vlm" and out.hint == ""


def test_a_question_naming_a_key_is_never_answered_by_a_word_match():
    lines = [
        OcrLine("Order # 56753", 0.99, Box(0, 0, 150, 20)),
        OcrLine("Harbor Market", 0.99, Box(0, 60, 150, 80)),
        OcrLine("06/03/2024", 0.99, Box(300, 0, 420, 20)),
    ]
    out = tool(always_read=True).run(
        query=understand("What is the date on the order?"), ocr_lines=lines
    )
    assert out.answer.text == "06/03/2024" and "only date" in out.route.reason
    lines.append(OcrLine("07/03/2024", 0.99, Box(300, 90, 420, 110)))
    out = tool(always_read=True).run(
        query=understand("What is the date on the order?"), ocr_lines=lines
    )
    assert out.answer is None  # two dates, no 'date' key: abstain, never 'Order # 56753'


def test_a_value_whose_box_starts_inside_a_tight_label_column_is_still_the_keys():
    # OCR pads each box past its ink: a long label's box runs into the value column
    lines = [
        OcrLine("Customer reference:", 0.99, Box(61, 201, 268, 227)),
        OcrLine("QK7T2Z", 0.99, Box(257, 201, 357, 225)),
        OcrLine("Order No:", 0.99, Box(61, 228, 160, 254)),
        OcrLine("55-0193", 0.99, Box(273, 229, 370, 253)),
    ]
    assert (
        tool().run(query=understand("What is the customer reference?"), ocr_lines=lines).answer.text
        == "QK7T2Z"
    )


def _turned(rows: list[tuple[str, str]], degrees: float) -> list[OcrLine]:
    """Key and value columns of a form photographed turned by `degrees` (counter-clockwise):
    each line's upright box and baseline angle, as the OCR reports them."""
    t = np.radians(degrees)
    out = []
    for r, (key, value) in enumerate(rows):
        for text, x0, w in ((key, 0, 110), (value, 170, 130)):
            corners = [(x, y) for x in (x0, x0 + w) for y in (26 * r, 26 * r + 20)]
            turned = [
                (400 + x * np.cos(t) + y * np.sin(t), 300 - x * np.sin(t) + y * np.cos(t))
                for x, y in corners
            ]
            xs, ys = zip(*turned, strict=True)
            out.append(OcrLine(text, 0.99, Box(min(xs), min(ys), max(xs), max(ys)), angle=degrees))
    return out


@pytest.mark.parametrize("degrees", [8.0, -8.0])
def test_a_form_photographed_at_an_angle_pairs_each_key_with_its_own_row(degrees):
    # turned 8 degrees, a value's upright box overlaps the next key's row more than its own
    rows = [
        ("Account:", "3676 2347 1893"),
        ("Member ID:", "MB-694201"),
        ("Order No:", "77-1204-3"),
        ("Date:", "18/10/2025"),
        ("Amount due:", "$3841.09"),
    ]
    lines = _turned(rows, degrees)
    for question, value in (
        ("What is the member ID?", "MB-694201"),
        ("What is the order number?", "77-1204-3"),
        ("What is the account number?", "3676 2347 1893"),
    ):
        out = tool().run(query=understand(question), ocr_lines=lines)
        assert out.answer.text == value, (question, out.route.reason)
