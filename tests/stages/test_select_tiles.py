"""select_tiles: crops around evidence (never cells chosen by position), within the budget.

Each crop is priced by the declared model's family (the tiny random-weight Qwen2-VL: its config
and processor, no weights), i.e. exactly the visual tokens the VLM will spend on it."""

import numpy as np
import pytest

from cascade import Box, Detection, Frame, Image, OcrLine
from cascade.evidence.understanding import understand
from cascade.models import Models
from cascade.registry import get_stage_class
from cascade.vlm import build_tiny_vlm

FULL = Image(np.full((448, 1344, 3), 90, np.uint8), source="wide.png")
GRID = [FULL.crop(Box(x, 0, x + 448, 448)) for x in (0, 448, 896)]
MODELS = Models({"vlm": {"id": str(build_tiny_vlm(size="test"))}})


def select(**params):
    return get_stage_class("select_tiles")(params, models=MODELS)


def test_crop_cost_is_what_the_declared_model_spends():
    small = Models({"vlm": {"id": MODELS["vlm"].spec.id, "max_pixels": 28 * 28 * 4}})
    lines = [OcrLine("PIER 32N", 0.97, Box(200, 100, 400, 160))]
    out = get_stage_class("select_tiles")({"max_visual_tokens": 10_000}, models=small).run(
        images=[FULL], query=understand("What does the sign say?"), ocr_lines=lines
    )
    (crop,) = out.tiles
    assert out.visual_tokens == small["vlm"].family.visual_tokens(crop.width, crop.height) <= 4
    assert MODELS["vlm"].family.visual_tokens(crop.width, crop.height) > 4


def test_a_sign_across_a_tile_boundary_is_sent_whole():
    lines = [OcrLine("PIER 32N", 0.97, Box(420, 100, 480, 118))]  # the cut at x=448 splits it
    out = select().run(
        images=[FULL], query=understand("What does the sign say?"), ocr_lines=lines, tiles=GRID
    )
    (crop,) = out.tiles
    assert crop.box.x0 < 420 and crop.box.x1 > 480 and crop.box.area < 0.02 * FULL.box.area
    assert out.routes[-1].branch == "evidence" and "text" in out.routes[-1].reason
    assert out.visual_tokens < 40


def test_small_text_is_enlarged_and_paid_for():
    lines = [OcrLine("GATE 5W", 0.95, Box(600, 300, 650, 312))]  # 12-px text
    out = select(min_text_px=24).run(
        images=[FULL], query=understand("Read the sign."), ocr_lines=lines
    )
    (crop,) = out.tiles
    assert crop.scale[1] >= 2.0 and crop.height >= 2 * crop.box.height - 1


def test_crops_are_cut_to_a_size_the_processor_keeps_so_no_pixel_is_resampled():
    family = MODELS["vlm"].family
    photo = Image(np.random.default_rng(0).integers(0, 255, (448, 1344, 3), dtype=np.uint8))
    lines = [OcrLine("DOCK 35", 0.99, Box(363, 185, 509, 231))]  # 46-px text: no enlarging
    (crop,) = (
        select()
        .run(images=[photo], query=understand("What does the sign say?"), ocr_lines=lines)
        .tiles
    )
    assert crop.scale == (1.0, 1.0) and crop.width % 28 == 0 and crop.height % 28 == 0
    assert family.resized(crop.width, crop.height) == (crop.height, crop.width)  # sent as is
    b = crop.box
    assert b.x0 <= 363 and b.x1 >= 509 and b.y0 <= 185 and b.y1 >= 231
    assert np.array_equal(crop.pixels, photo.pixels[int(b.y0) : int(b.y1), int(b.x0) : int(b.x1)])


def test_key_and_value_far_apart_on_a_row_stay_together_and_win():
    page = Image(np.full((600, 500, 3), 255, np.uint8))
    lines = [
        OcrLine("SUBTOTAL", 0.99, Box(20, 400, 120, 420)),
        OcrLine("7.00", 0.99, Box(420, 400, 470, 420)),
        OcrLine("TOTAL", 0.99, Box(20, 440, 90, 460)),
        OcrLine("7.75", 0.99, Box(420, 440, 470, 460)),
        OcrLine("CORNER CAFE", 0.99, Box(150, 20, 350, 50)),
    ]
    out = select().run(
        images=[page], query=understand("What is the total amount?"), ocr_lines=lines
    )
    (crop,) = out.tiles  # the title and the subtotal row are not worth half the key-value pair
    assert crop.box.x0 <= 20 and crop.box.x1 >= 470 and crop.box.y0 <= 440 and crop.box.y1 >= 460


def test_the_named_key_among_several_numbers_is_the_one_sent():
    page = Image(np.full((800, 600, 3), 255, np.uint8))
    lines = [
        OcrLine("Invoice No: INV-30417", 0.99, Box(40, 100, 300, 122)),
        OcrLine("P.O. Number: 7781-204", 0.99, Box(40, 200, 300, 222)),
        OcrLine("Account No: 55-0193", 0.99, Box(40, 300, 300, 322)),
    ]
    for question in ("What is the PO number on this letter?", "采购订单号是多少？"):
        out = select(max_visual_tokens=64, budget_share=0).run(
            images=[page], query=understand(question), ocr_lines=lines
        )
        (crop,) = out.tiles
        assert crop.box.y0 <= 200 and crop.box.y1 >= 222 and crop.box.y1 < 300 and crop.box.y0 > 122


def test_named_detections_and_budget():
    dets = [
        Detection("bus", 0.9, Box(10, 10, 400, 400)),
        Detection("dog", 0.9, Box(500, 10, 600, 80)),
    ]
    out = select().run(
        images=[FULL], query=understand("How many buses are there?"), detections=dets
    )
    (crop,) = out.tiles
    assert crop.box.x1 < 500  # the dog is not what the question names
    tight = select(max_visual_tokens=8).run(
        images=[FULL], query=understand("How many buses?"), detections=dets
    )
    (small,) = tight.tiles  # evidence that does not fit is shrunk, never swapped for other pixels
    assert small.box == crop.box and 0 < tight.visual_tokens <= 8


def test_no_evidence_sends_the_best_whole_frame_not_the_first_tiles():
    frames = [Frame(np.full((720, 1280, 3), 40, np.uint8), timestamp=t) for t in (5.0, 1.0)]
    junk = [OcrLine("B", 0.9, Box(10, 10, 20, 22), timestamp=5.0)]  # one glyph: no evidence
    out = select().run(
        images=frames, query=understand("What does the sign say?"), ocr_lines=junk, tiles=GRID
    )
    (sent,) = out.tiles
    assert sent.timestamp == 5.0 and max(sent.width, sent.height) == 448
    assert sent.box == frames[0].box
    route = out.routes[-1]
    assert route.branch == "fallback" and "best whole frame (t=5.0 s)" in route.reason


def test_other_frames_do_not_count_and_routes_chain():
    from cascade.artifacts import Route

    lines = [OcrLine("STOP", 0.99, Box(1000, 100, 1100, 150), media_index=1)]
    out = select().run(
        images=[FULL],
        query=understand("read the sign"),
        ocr_lines=lines,
        routes=[Route("read", "earlier")],
    )
    assert [r.branch for r in out.routes] == ["read", "fallback"]


def test_a_date_question_without_a_date_key_sends_the_date():
    page = Image(np.full((300, 600, 3), 255, np.uint8))
    lines = [
        OcrLine("Order # 56753", 0.99, Box(20, 20, 200, 44)),
        OcrLine("06/03/2024", 0.99, Box(450, 20, 580, 44)),
        OcrLine("Harbor Market", 0.99, Box(20, 100, 200, 124)),
    ]
    out = select().run(
        images=[page], query=understand("What is the date on the order?"), ocr_lines=lines
    )
    assert any(t.box.x0 <= 450 and t.box.x1 >= 580 for t in out.tiles)


def test_a_merged_region_the_processor_would_shrink_is_sent_as_its_units():
    """A page's text block and the key-value line inside it merge into one region; over the
    model's pixel cap the processor would resample that region (and the line) down, so the units
    go alone: the invoice line reaches the model pixel for pixel."""
    family = MODELS["vlm"].family
    page = Image(np.full((1180, 1770, 3), 235, np.uint8), source="page.png")
    lines = [
        OcrLine(
            f"Line {k} of the letter: please quote the references above",
            0.95,
            Box(120, 80 + 36 * k, 1650, 108 + 36 * k),
        )
        for k in range(20)
    ]
    invoice = OcrLine("Invoice No: INV-96606", 0.97, Box(120, 800, 400, 824))
    out = select().run(
        images=[page], query=understand("What is the invoice number?"), ocr_lines=[*lines, invoice]
    )
    held = [
        c
        for c in out.tiles
        if c.box.x0 <= 120 and c.box.x1 >= 400 and c.box.y0 <= 800 and c.box.y1 >= 824
    ]
    assert held and len({c.box for c in out.tiles}) == len(out.tiles), out.tiles
    assert all(
        family.resized(c.width, c.height) == (c.height, c.width) and c.scale[1] >= 1.0 for c in held
    )


def test_a_mildly_shrunk_region_holding_several_candidates_stays_one_crop():
    """Three numbers stacked on a letter merge into one region that the processor shrinks a
    little (its lines stay over `legible_px`): one crop holds all three, where sending the units
    alone would fit only one of them in the budget."""
    page = Image(np.full((400, 600, 3), 240, np.uint8), source="letter.png")
    lines = [
        OcrLine("Invoice No: INV-40213", 0.98, Box(40, 100, 440, 124)),
        OcrLine("Order No: 77-1203", 0.98, Box(40, 130, 440, 154)),
        OcrLine("Account No: AC-5521", 0.98, Box(40, 160, 440, 184)),
    ]
    query = understand("What is the number on this letter?")
    out = select().run(images=[page], query=query, ocr_lines=lines)
    crop = out.tiles[0].box
    assert len(out.tiles) == 1 and all(
        crop.x0 <= ln.box.x0 and crop.y0 <= ln.box.y0 and crop.y1 >= ln.box.y1 for ln in lines
    )
    split = select(legible_px=100).run(images=[page], query=query, ocr_lines=lines)
    assert not any(t.box.y0 <= 100 and t.box.y1 >= 184 for t in split.tiles)


def test_numbers_the_question_does_not_tell_apart_are_all_sent_smaller_rather_than_one_guessed():
    """Four numbered fields and a question naming none of them: each is as plausible as the
    next. At their size they cost more than the budget, so all are sent shrunk by one factor
    (their text still legible), never the best-ranked one alone."""
    page = Image(np.full((700, 1000, 3), 245, np.uint8), source="letter.png")
    rows = [
        ("PO number:", "PO-99721"),
        ("Tracking number:", "1Z381134H5"),
        ("Account:", "1322 1090 6770"),
        ("Booking ref:", "CQ8M1J"),
        ("Ticket ID:", "TK-153376"),
    ]
    lines = [
        OcrLine(text, 0.99, Box(x0, 190 + 90 * r, x0 + w, 216 + 90 * r))
        for r, (key, value) in enumerate(rows)
        for text, x0, w in ((key, 65, 200), (value, 300, 170))
    ]
    query = understand("单据编号是多少？")
    out = select(budget_share=0, max_visual_tokens=120).run(
        images=[page], query=query, ocr_lines=lines
    )
    assert out.visual_tokens <= 120 and "recall first" in out.routes[-1].reason, out.routes[
        -1
    ].reason
    for r, (key, value) in enumerate(rows):
        if key != "Account:":
            y0, y1 = 190 + 90 * r, 216 + 90 * r
            assert any(c.box.y0 <= y0 and c.box.y1 >= y1 and c.box.x1 >= 470 for c in out.tiles), (
                value
            )
    assert all(26 * c.scale[1] >= 14 for c in out.tiles)  # the lines (26 px) still legible


@pytest.mark.parametrize("side, whole", [(560, 400), (308, 121), (1400, 2500)])
def test_the_budget_is_a_share_of_the_image_but_a_few_units_on_a_small_one(side, whole):
    """10 % of what the image costs whole, never under 100 tokens (a 1,000-token image's 10 %),
    nor over 25 % of a small image: what a few legible units cost, still a fraction."""
    from cascade.vlm.families import ImageLimits

    image = Image(np.full((side, side, 3), 255, np.uint8))
    full = MODELS["vlm"].family.with_limits(ImageLimits(resolution="full"))
    assert full.image_cost(side, side).tokens == whole
    assert select()._budget([image]) == {400: 100, 121: 30, 2500: 250}[whole]
