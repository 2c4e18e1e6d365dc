"""vlm_answer with the `tower` reduction: guided by the evidence the stages found, never applied
unguided to a reading question (tiny random-weight Qwen2-VL, real OCR)."""

from __future__ import annotations

import numpy as np
import pytest

from cascade.artifacts import Box, Detection, Image, OcrLine
from cascade.evidence.understanding import understand
from cascade.stages.vlm_answer import VLMAnswer


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from cascade.vlm import build_tiny_vlm

    path = str(build_tiny_vlm(tmp_path_factory.mktemp("tiny"), family="qwen2_vl", size="test"))
    return {"vlm": {"id": path, "device": "cpu", "reduction": "tower", "keep_ratio": 0.5}}


def _page() -> Image:
    from PIL import Image as PILImage
    from PIL import ImageDraw

    from cascade.eval.fonts import load_font

    page = PILImage.new("RGB", (420, 300), "white")
    draw = ImageDraw.Draw(page)
    font = load_font("DejaVuSans.ttf", 30)
    draw.text((30, 40), "TOTAL 84.50", font=font, fill=(10, 10, 10))
    draw.text((30, 200), "Gate 12", font=font, fill=(10, 10, 10))
    return Image(np.asarray(page), source="page")


def _routes(answer):
    return {r.branch: r for r in answer.evidence.routes}


def test_a_reading_question_without_evidence_keeps_every_token(models):
    st = VLMAnswer({"max_new_tokens": 2}, name="vlm", models=models)
    out = st(images=[_page()], question="What is the total?")
    a = out.answer
    assert a.bill.visual_tokens == a.bill.unreduced_visual_tokens  # nothing dropped silently
    assert a.bill.reduction == "none"
    route = _routes(a)["tower_not_applied"]
    assert "reading question (key_value)" in route.reason and "image(s) 0" in route.reason


def test_ocr_lines_guide_the_selection_target_first(models):
    from cascade.stages.ocr import Ocr

    page = _page()
    lines = Ocr(name="ocr")(images=[page]).lines
    assert {ln.text.replace(" ", "") for ln in lines} >= {"TOTAL84.50", "Gate12"}
    st = VLMAnswer({"max_new_tokens": 2}, name="vlm", models=models)
    q = understand("What is the total?")
    a = st(images=[page], question=q.question, query=q, ocr_lines=lines).answer
    route = _routes(a)["tower_guided"]
    assert a.bill.reduction == "tower" and a.bill.visual_tokens < a.bill.unreduced_visual_tokens
    assert route.scores["evidence_boxes"] == len(lines) and route.scores["target_boxes"] == 1
    # the amount's own characters, then its line; 'Gate 12' is not on the total's row
    assert route.scores["lead_boxes"] == 2
    assert "text line(s)" in route.reason


def test_a_scene_question_without_evidence_says_it_used_the_variance_rule(models):
    st = VLMAnswer({"max_new_tokens": 2}, name="vlm", models=models)
    a = st(images=[_page()], question="What animal is in the picture?").answer
    assert a.bill.reduction == "tower" and a.bill.visual_tokens < a.bill.unreduced_visual_tokens
    assert "vary most" in _routes(a)["tower_unguided"].reason


def test_evidence_lands_in_a_tiles_own_pixels_and_other_media_is_ignored():
    from cascade.stages._tower_guide import image_regions

    page = _page()
    tile = page.crop(Box(20, 180, 420, 300)).resized(200, 60)  # half scale, offset (20, 180)
    gate = OcrLine("Gate 12", 0.9, Box(30, 200, 150, 236))
    other = OcrLine("Gate 12", 0.9, Box(30, 200, 150, 236), media_index=1)
    outside = OcrLine("TOTAL 84.50", 0.9, Box(30, 40, 220, 76))
    bus = Detection("bus", 0.8, Box(220, 190, 400, 290))
    regions, used = image_regions(
        tile, understand("How many buses are there?"), [gate, other, outside, bus]
    )
    assert used == [
        bus,
        gate,
    ]  # the question's label first; another image's line and one off the tile left out
    assert regions.size == (200, 60)
    assert regions.boxes == ((100.0, 5.0, 190.0, 55.0), (5.0, 10.0, 65.0, 28.0))


def test_the_target_comes_first_then_its_row_then_spans_of_the_answers_type():
    from cascade.stages._tower_guide import image_regions

    page = _page()
    tel = OcrLine("Tel 555 0199", 0.9, Box(30, 10, 200, 30))
    sub = OcrLine("Subtotal 38.00", 0.9, Box(30, 100, 220, 120))
    key = OcrLine("Total", 0.9, Box(30, 200, 100, 222))
    value = OcrLine("40.90", 0.9, Box(300, 203, 360, 221))
    _, used = image_regions(page, understand("What is the total?"), [tel, sub, key, value])
    assert used == [key, value, sub, tel]


def test_a_code_question_keeps_the_defining_line_first():
    from cascade.stages._tower_guide import image_regions

    page = _page()
    imp = OcrLine('import { encodeOrder } from "./lib.js";', 0.9, Box(10, 10, 400, 30))
    fn = OcrLine("export async function syncLedger(items) {", 0.9, Box(10, 40, 400, 60))
    _, used = image_regions(
        page, understand("Which function is declared in this snippet?"), [imp, fn]
    )
    assert used == [fn, imp]


def test_the_row_key_the_question_names_leads_not_every_row_key_sharing_a_word():
    from cascade.stages._tower_guide import image_regions

    page = _page()
    title = OcrLine("Weekday Bus Departures", 0.9, Box(10, 5, 300, 25))
    head = [
        OcrLine(t, 0.9, Box(x, 40, x + 70, 60))
        for t, x in (("Service", 10), ("Elm Park", 110), ("Quay", 210))
    ]
    keys = [
        OcrLine(f"Bus {n}", 0.9, Box(10, 70 + 30 * i, 80, 90 + 30 * i))
        for i, n in enumerate((12, 14, 16))
    ]
    cells = [
        OcrLine(
            f"0{7 + i}:{10 * j + 5}",
            0.9,
            Box(110 + 100 * j, 70 + 30 * i, 170 + 100 * j, 90 + 30 * i),
        )
        for i in range(3)
        for j in range(2)
    ]
    regions, used = image_regions(
        page, understand("When does Bus 16 leave Elm Park?"), [title, *head, *keys, *cells]
    )
    # the row key and the column key hold two of its words each; then their rows (the answer
    # 08:15 / 09:05 on bus 16's row, the header row), which lead with them; then the rest
    assert used[:2] == [head[1], keys[2]]
    assert set(used[2:6]) == {head[0], head[2], cells[4], cells[5]} and regions.lead == 6
    assert set(used[6:9]) == {title, keys[0], keys[1]}  # one word of the question each


def test_a_c_signature_without_a_brace_leads_on_a_page_of_code_and_the_kind_asked_for_first():
    from cascade.stages._tower_guide import image_regions

    page = _page()
    code = [
        OcrLine(t, 0.9, Box(10, 10 + 30 * i, 400, 30 + 30 * i))
        for i, t in enumerate(
            (
                "1 #include <stdio.h>",
                "2 static int total_cost(const char *name, int n)",
                "3 {",
                "4 int total = count_items(name);",
                "5 return total;",
                "6 }",
            )
        )
    ]
    regions, used = image_regions(
        page, understand("What is the name of the function that this code defines?"), code
    )
    assert (
        used[0] is code[1] and regions.lead == 2
    )  # its name, then the line; not line 4's variable


def test_the_keys_line_leads_a_line_that_only_names_the_document():
    from cascade.stages._tower_guide import image_regions

    page = _page()
    title = OcrLine("TRAVEL INVOICE", 0.9, Box(10, 5, 300, 25))
    ref = OcrLine("Invoice ref: 5521", 0.9, Box(10, 40, 200, 60))
    item = OcrLine("Taxi: 12.40", 0.9, Box(10, 80, 200, 100))
    total = OcrLine("Total: 88.10", 0.9, Box(10, 200, 200, 220))
    q = understand("How much is the total on this invoice?")
    assert (q.key, q.key_noun) == ("total", "invoice")
    regions, used = image_regions(page, q, [title, ref, item, total])
    assert used[0] is total and regions.lead == 2  # the amount, then its line
    assert set(used[1:3]) == {title, ref}  # they name the document: after the key, before the rest


def test_a_section_asked_for_by_its_numeral_leads_though_it_holds_no_word_of_the_question():
    from cascade.stages._tower_guide import image_regions

    page = _page()
    lines = [
        OcrLine(t, 0.9, Box(10, 10 + 25 * i, 300, 30 + 25 * i))
        for i, t in enumerate(
            (
                "Owner's Handbook",
                "I. Getting Started",
                "Unpack the unit and charge it.",
                "II. Daily Use",
                "Press the key once to wake the screen.",
                "III. Warranty Terms",
                "Repairs are free for two years.",
            )
        )
    ]
    regions, used = image_regions(page, understand("Name the third section of the page."), lines)
    assert used[0] is lines[5] and regions.lead == 1


def test_the_answers_own_characters_lead_its_line_so_a_long_line_still_gives_them():
    from cascade.stages._tower_guide import image_regions

    page = _page()
    fn = OcrLine(
        "export async function sanitizeSnapshot(key, path = {}) {", 0.9, Box(10, 40, 410, 60)
    )
    other = OcrLine("const res = await compressLedger(key);", 0.9, Box(30, 70, 300, 90))
    regions, used = image_regions(
        page, understand("Which function is declared in this snippet?"), [other, fn]
    )
    span, line = regions.boxes[:2]
    assert used == [fn, other] and regions.lead == 2 and line == (10, 40, 410, 60)
    # 'sanitizeSnapshot' is characters 22-38 of 56: the box over them, one character of slack
    per_char = 400 / 56
    assert span == pytest.approx((10 + 21 * per_char, 40, 10 + 39 * per_char, 60), abs=0.01)
