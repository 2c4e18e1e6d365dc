"""How the bench compares: evidence recall searches the gold as a run of characters (Chinese has
no words to split), a tool answer must be the gold span itself."""

from __future__ import annotations

import numpy as np
import pytest

from cascade.artifacts import Image
from cascade.eval.fonts import has_font
from cascade.eval.judge import Readers, normalize, same_span
from cascade.eval.render import render_sign


def test_normalize_keeps_chinese_characters_and_folds_width_and_case():
    assert normalize("出口 B3") == normalize("出口B3") == "出口B3"
    assert normalize("合计：８１．５０") == "合计8150"  # full-width digits folded
    assert normalize("Gate 12b") == "GATE12B"
    assert normalize("出口") not in normalize("入口 B3")  # not empty: a Chinese gold can miss


@pytest.mark.parametrize(
    "answer, gold, exact",
    [
        ("Tuesday", "Tuesday", True),
        ("tuesday.", "Tuesday", True),
        ("The east entrance will be closed on Tuesday for floor repairs.", "Tuesday", False),
        ("def load_settings(path, key=None):", "load_settings", False),
        ("load_settings", "load_settings", True),
        ("$12.50", "12.50", True),
        ("1250", "12.50", False),
        ("TOTAL 12.50", "12.50", False),
        ("INV–58213", "INV-58213", True),  # an en dash read for the hyphen
        ("INV 58213", "INV-58213", False),
        ("¥112.00", "112.00", True),
        ("总计：¥112.00", "112.00", False),
        ("出口 B3", "出口B3", True),
        ("2024年3月5日", "2024年3月5日", True),
        ("", "", False),
    ],
)
def test_same_span_is_the_span_not_the_line(answer, gold, exact):
    assert same_span(answer, gold) is exact


@pytest.fixture(scope="module")
def readers():
    return Readers()


@pytest.mark.parametrize("font", ["wqy-microhei.ttc", "wqy-zenhei.ttc"])
def test_the_judge_reads_a_chinese_sign_by_its_characters(font, readers):
    if not has_font(font):
        pytest.skip(f"needs the CJK font {font} (Debian: fonts-wqy-microhei / fonts-wqy-zenhei)")
    sign = Image(render_sign("停车场 B2", font, 24))
    assert readers.reads([sign], "停车场 B2")
    assert readers.reads([sign], "停车场B2")
    assert not readers.reads([sign], "售票处 B2")
    assert not readers.reads([sign], "")  # an empty gold is never "read"


def test_the_judge_looks_twice_at_a_small_image_and_at_every_scale_at_a_large_one(readers):
    """The detector only shrinks an image to its scale: every scale over a small image's side
    reads the same pixels, so a small one gets that look and one with the detector's view
    enlarged; a large one is read at each of the three scales."""
    small = Image(render_sign("GATE 4", "DejaVuSans-Bold.ttf", 24))
    assert len(list(readers.texts(small))) == 2 and readers.reads([small], "GATE 4")
    large = Image(np.full((1500, 2600, 3), 255, np.uint8))
    assert len(list(readers.texts(large))) == len(readers.det_sides) == 3


def test_the_enlarged_look_still_reads_the_pixels_as_given(readers):
    """Only the detector's view is enlarged: text shrunk past legibility stays unread."""
    sign = Image(render_sign("GATE 4", "DejaVuSans-Bold.ttf", 24))
    tiny = sign.resized(sign.width // 6, sign.height // 6)  # text about 4 px high
    assert not readers.reads([tiny], "GATE 4")
