"""A placard (text on a plate of its own) ranks above text printed on a vehicle, a shirt or a
screen among clutter, in retrieval, in what is sent and in the route; a question that singles out
no text gets every text the budget allows (recall first), the placard first."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image as PILImage
from PIL import ImageDraw

import cascade.stages  # noqa: F401
from cascade import Box, Image, OcrLine
from cascade.evidence.blocks import ByFrame, text_blocks
from cascade.evidence.signness import plate_key, sign_factors, signness
from cascade.evidence.size import text_fit
from cascade.evidence.understanding import understand
from cascade.models import Models
from cascade.registry import get_stage_class
from cascade.vlm import build_tiny_vlm

from ._render import font, scene, sign

MODELS = Models({"vlm": {"id": str(build_tiny_vlm(size="test"))}})  # prices crops; no weights


def stage(name: str, **params):
    return get_stage_class(name)(params, models=MODELS)


def printed(px: np.ndarray, text: str, size: int, x: int, y: int, ink=(235, 235, 235)) -> Box:
    """Draw `text` straight on the pixels (no plate of its own); its OCR-like box."""
    im = PILImage.fromarray(px)
    draw = ImageDraw.Draw(im)
    x0, y0, x1, y1 = draw.textbbox((x, y), text, font=font(size))
    draw.text((x, y), text, font=font(size), fill=ink)
    px[:] = np.asarray(im)
    return Box(x0 - 2, y0 - 3, x1 + 2, y1 + 3)


def photo_with(
    plate_text: str, plate_size: int, printed_size: int, index: int = 0, seed: int = 3
) -> tuple[Image, list[OcrLine]]:
    """A 1280x720 photo: a bus-like panel with two texts printed on it, and a small placard."""
    px = scene(1280, 720, seed=seed)
    px[380:640, 60:700] = (30, 60, 140)  # the vehicle's side: its colour goes on past its texts
    boxes = {
        "CITY LINK": printed(px, "CITY LINK", printed_size, 120, 420),
        "NORTH DEPOT": printed(px, "NORTH DEPOT", printed_size, 420, 420),
    }
    plate = sign(plate_text, plate_size)
    x, y = 900, 200
    px[y : y + plate.shape[0], x : x + plate.shape[1]] = plate
    boxes[plate_text] = Box(
        x - 3, y - 3, x + plate.shape[1] + 3, y + plate.shape[0] + 3
    )  # OCR pads
    lines = [OcrLine(t, 0.95, b, media_index=index) for t, b in boxes.items()]
    return Image(px, media_index=index), lines


def by_text(weights: dict) -> dict[str, float]:
    return {b.text: w for b, w in weights.items()}


def test_a_placard_is_more_sign_like_than_text_printed_on_a_vehicle():
    image, lines = photo_with("PIER 12", 18, 16)
    blocks = text_blocks(lines)
    weights, measured = sign_factors(blocks, ByFrame([image]))
    assert (
        by_text(measured)["PIER 12"]
        > 0.3
        > max(by_text(measured)["CITY LINK"], by_text(measured)["NORTH DEPOT"])
    )
    assert by_text(weights)["PIER 12"] == 1.0 and by_text(weights)["CITY LINK"] < 0.6


def test_texts_crowded_together_are_less_sign_like():
    px = scene(960, 540, seed=5)
    boxes = []
    for k, text in enumerate(("OPEN", "SALE", "NEW")):  # three plates side by side: a shop front
        plate = sign(text, 18)
        x = 100 + k * (plate.shape[1] + 6)
        px[100 : 100 + plate.shape[0], x : x + plate.shape[1]] = plate
        boxes.append(Box(x - 3, 97, x + plate.shape[1] + 3, 103 + plate.shape[0]))
    alone = sign("DOCK 7", 18)
    px[400 : 400 + alone.shape[0], 700 : 700 + alone.shape[1]] = alone
    lone_box = Box(697, 397, 703 + alone.shape[1], 403 + alone.shape[0])
    image = Image(px, media_index=0)
    crowd = [
        OcrLine(t, 0.95, b, media_index=0)
        for t, b in zip(("OPEN", "SALE", "NEW"), boxes, strict=True)
    ]
    lone = OcrLine("DOCK 7", 0.95, lone_box, media_index=0)
    blocks = text_blocks([*crowd, lone])
    lone_block = next(b for b in blocks if b.text == "DOCK 7")
    crowded = [b for b in blocks if b is not lone_block]
    assert signness(image, lone_block, blocks) > max(signness(image, b, blocks) for b in crowded)


def test_on_flat_ground_sign_ness_tells_nothing_and_ranks_nothing():
    flat = Image(np.full((720, 1280, 3), 120, np.uint8), media_index=0)
    lines = [
        OcrLine("ROOM 27K", 0.95, Box(10, 10, 90, 26)),
        OcrLine("SALE TODAY", 0.95, Box(400, 300, 700, 348)),
    ]
    fit = text_fit(understand("What does the sign say?"), text_blocks(lines), ByFrame([flat]))
    assert all(w == 1.0 for w in fit.weights.values()) and "sign-ness" not in fit.reason


@pytest.mark.parametrize("question", ["What does the small sign say?", "小牌子上写的是什么？"])
def test_a_placard_outranks_smaller_text_printed_on_a_vehicle(question):
    # the vehicle's texts are printed a little smaller than the placard (within the size rule's
    # 1.4x): by size alone they would come first
    image, lines = photo_with("PIER 12", 18, 14)
    query = understand(question)
    fit = text_fit(query, text_blocks(lines), ByFrame([image]))
    weights = by_text(fit.weights)
    assert weights["PIER 12"] > max(weights["CITY LINK"], weights["NORTH DEPOT"])
    assert "sign-ness: 'PIER 12' stands on its own plate" in fit.reason


@pytest.mark.parametrize(
    "question", ["Which words are on the placard in these photos?", "这些照片中的标牌上写了什么？"]
)
def test_retrieval_ranks_the_photo_with_the_placard_first(question):
    # photo 0: only a vehicle's texts, printed larger; photo 1: a vehicle's texts and a placard
    px = scene(1280, 720, seed=4)
    px[380:640, 60:700] = (30, 60, 140)
    other_lines = [
        OcrLine(t, 0.95, printed(px, t, 22, x, 420), media_index=0)
        for t, x in (("CITY LINK", 120), ("NORTH DEPOT", 420))
    ]
    other = Image(px, media_index=0)
    target, target_lines = photo_with("PIER 12", 18, 16, index=1)
    out = stage("retrieve", top_k=1)(
        images=[other, target], query=understand(question), ocr_lines=[*other_lines, *target_lines]
    )
    assert out.images[0].media_index == 1
    assert "sign-ness: 'PIER 12'" in out.routes[0].reason


def crop_holds(crop, box: Box) -> bool:
    b = crop.box
    return b.x0 <= box.x0 and b.x1 >= box.x1 and b.y0 <= box.y0 and b.y1 >= box.y1


@pytest.mark.parametrize("question", ["What is written on the little plate?", "小牌子上写着什么？"])
def test_every_text_is_sent_when_none_is_singled_out_the_placard_first(question):
    # the vehicle's texts printed at half the placard's size: by the size rule alone the placard
    # would weigh under half of them and not be sent; recall first sends all three, placard first
    image, lines = photo_with("PIER 12", 24, 12)
    out = stage("select_tiles")(images=[image], query=understand(question), ocr_lines=lines)
    plate = next(ln.box for ln in lines if ln.text == "PIER 12")
    assert any(crop_holds(t, plate) for t in out.tiles)
    assert len(out.tiles) >= 2 and out.visual_tokens <= 0.1 * 1280 * 720 / 28**2 + 64
    reason = out.routes[-1].reason
    assert "recall first: the question singles out no text" in reason


def test_a_question_naming_a_word_still_sends_only_what_it_names():
    image, lines = photo_with("PIER 12", 18, 16)
    out = stage("select_tiles")(
        images=[image], query=understand("What number follows PIER?"), ocr_lines=lines
    )
    plate = next(ln.box for ln in lines if ln.text == "PIER 12")
    assert len(out.tiles) == 1 and crop_holds(out.tiles[0], plate)
    assert "recall first" not in out.routes[-1].reason


@pytest.mark.slow  # real OCR on every image of the set
@pytest.mark.parametrize(
    "question", ["Which words are on the placard in these photos?", "这些照片中的标牌上写了什么？"]
)
def test_a_sign_question_on_a_small_set_reads_every_image(question):
    from ._render import with_signs

    # retrieval put a caption photo and an empty one first; the placard is in the last image,
    # which widening in retrieval order alone would reach only if the first ones held nothing
    caption, empty, plate = (
        Image(with_signs(signs, seed=21 + i).pixels, media_index=i)
        for i, signs in enumerate(
            ([(sign("SUMMER FESTIVAL", 40), 60, 60)], [], [(sign("PIER 12", 18), 620, 400)])
        )
    )
    ocr = stage("ocr")
    out = stage("find_evidence", hires_side=0)(
        query=understand(question),
        frames=[caption],
        ocr_lines=ocr(images=[caption]).lines,
        ranked=[caption, empty, plate],
    )
    assert any("PIER" in ln.text for ln in out.ocr_lines)
    assert "every image of the set (3) read at full resolution" in out.routes[-1].reason
    off = stage("find_evidence", hires_side=0, whole_set=0)(
        query=understand(question),
        frames=[caption],
        ocr_lines=ocr(images=[caption]).lines,
        ranked=[caption, empty, plate],
    )
    assert "every image" not in off.routes[-1].reason
    assert not any("PIER" in ln.text for ln in off.ocr_lines)  # the caption was taken as enough


def test_a_narrow_block_is_measured_whole():
    # a lone glyph column: narrower than its core inset (OCR gives such boxes): no error, a value
    image, _ = photo_with("PIER 12", 18, 16)
    narrow = text_blocks([OcrLine("I1", 0.9, Box(573.4, 1.0, 576.0, 42.0))])[0]
    assert 0.0 <= signness(image, narrow) <= 1.0


def test_text_read_again_by_another_pass_is_one_line_the_more_confident():
    from cascade.stages.find_evidence import add_lines

    lines = [
        OcrLine("EXIT SM", 0.80, Box(100, 100, 200, 130)),
        OcrLine("CH 5", 0.9, Box(0, 0, 40, 20)),
    ]
    add_lines(
        lines,
        [
            OcrLine("EXIT 5N", 0.97, Box(98, 99, 203, 131)),  # the same sign, read better
            OcrLine("CH 5", 0.5, Box(1, 1, 39, 19)),  # the same logo, read worse
            OcrLine("PIER 12", 0.9, Box(400, 400, 480, 420)),  # new text
            OcrLine("EXIT 5N", 0.97, Box(98, 99, 203, 131), media_index=1),
        ],
    )  # another image
    assert [(ln.text, ln.media_index) for ln in lines] == [
        ("EXIT 5N", 0),
        ("CH 5", 0),
        ("PIER 12", 0),
        ("EXIT 5N", 1),
    ]


@pytest.mark.slow  # real OCR, both the plain and the higher-resolution pass
def test_a_sign_read_by_both_passes_is_answered_once():
    from ._render import with_signs

    plate = Image(
        with_signs([(sign("PIER 12", 28), 820, 500)], seed=23, size=(1280, 720)).pixels,
        media_index=0,
    )
    empty = Image(with_signs([], seed=24, size=(1280, 720)).pixels, media_index=1)
    assert max(plate.width, plate.height) > 960  # large: the higher-resolution pass runs too
    query = understand("Which words are on the placard in these photos?")
    fine = stage("ocr")(images=[plate]).lines  # the fine pass read the retrieved image
    assert [ln.text for ln in fine if "PIER" in ln.text] == ["PIER 12"]
    out = stage("find_evidence")(query=query, frames=[plate], ocr_lines=fine, ranked=[plate, empty])
    assert "text detection at 1920 px" in out.routes[-1].reason
    assert [ln.text for ln in out.ocr_lines if "PIER" in ln.text] == ["PIER 12"]
    answer = stage("tool_answer")(query=query, ocr_lines=out.ocr_lines, images=out.frames).answer
    assert answer is not None and answer.text == "PIER 12"


def test_plates_measured_once_are_read_back_and_change_nothing():
    image, lines = photo_with("EXIT 3", 40, 40)
    blocks = text_blocks(lines)
    frames = ByFrame([image])
    plain = sign_factors(blocks, frames)
    plates: dict[str, float] = {}
    kept = sign_factors(blocks, frames, plates)
    assert kept == plain and len(plates) == len(blocks)  # the same numbers, each plate kept
    # the kept numbers are what a later question uses (a video's index holds them)
    top = max(blocks, key=lambda b: plain[1][b])
    assert plain[1][top] > 0
    plates[plate_key(image, top)] = 0.0
    assert sign_factors(blocks, frames, plates)[1][top] == 0.0
