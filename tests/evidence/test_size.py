"""A size the question names ranks the texts by their print size relative to their frame: "the
small sign" retrieves and sends the text printed smallest first (a similar one too: recall first),
"the big banner" the largest; the route says which text was taken as the small one and why."""

from __future__ import annotations

import numpy as np
import pytest

import cascade.stages  # noqa: F401
from cascade import Box, Image, OcrLine
from cascade.evidence.blocks import ByFrame, text_blocks
from cascade.evidence.size import size_fit
from cascade.evidence.understanding import understand
from cascade.models import Models
from cascade.registry import get_stage_class
from cascade.vlm import build_tiny_vlm

MODELS = Models({"vlm": {"id": str(build_tiny_vlm(size="test"))}})  # prices crops; no weights


def stage(name: str, **params):
    return get_stage_class(name)(params, models=MODELS)


def photo(index: int, width: int, height: int) -> Image:
    return Image(np.full((height, width, 3), 120, np.uint8), media_index=index)


def line(text: str, index: int, x: int, y: int, height: int, confidence: float = 0.97) -> OcrLine:
    return OcrLine(
        text, confidence, Box(x, y, x + 0.6 * height * len(text), y + height), media_index=index
    )


# A set of three photos of different sizes: a big caption in the first, nothing in the second, a
# small plate in the third (its 16 px are 1.3 % of a 1200-px photo; the caption's 40 px are 7 %).
SET = [photo(0, 800, 560), photo(1, 1000, 700), photo(2, 1600, 1200)]
SET_LINES = [line("SUMMER FESTIVAL", 0, 60, 40, 40), line("ROOM 27K", 2, 900, 700, 16)]


def test_print_size_is_relative_to_the_frame():
    # the same 16 px are small in a 1200-px photo and not in a 300-px one
    lines = [line("ROOM 27K", 0, 10, 10, 16), line("BAY 4", 1, 10, 10, 16)]
    frames = ByFrame([photo(0, 1600, 1200), photo(1, 400, 300)])
    fit = size_fit("small", text_blocks(lines), frames)
    weights = {b.text: fit.of(b) for b in text_blocks(lines)}
    assert weights["ROOM 27K"] == 1.0 and weights["BAY 4"] < 0.2 and fit.contrast
    assert "size small: 1 text(s) printed smallest ('ROOM 27K'" in fit.reason
    big = size_fit("big", text_blocks(lines), frames)
    assert big.of(text_blocks(lines)[1]) == 1.0 and big.of(text_blocks(lines)[0]) < 0.2


def test_texts_of_a_similar_size_both_fit_and_no_size_ranks_nothing():
    lines = [line("ROOM 27K", 0, 10, 10, 16), line("EXIT 3", 0, 400, 300, 20)]
    frames = ByFrame([photo(0, 1280, 720)])
    fit = size_fit("small", text_blocks(lines), frames)
    assert all(fit.of(b) == 1.0 for b in text_blocks(lines)) and not fit.contrast
    assert "none stands out by size" in fit.reason
    assert size_fit(None, text_blocks(lines), frames).reason == ""


def test_faint_glyphs_do_not_set_what_small_is():
    lines = [
        line("ROOM 27K", 0, 10, 10, 16),
        line("SALE TODAY", 0, 400, 300, 48),
        line("ii", 0, 900, 600, 6, confidence=0.5),
    ]  # texture misread as two tiny glyphs
    blocks = text_blocks(lines)
    strength = {b: (0.1 if b.text == "ii" else 1.0) for b in blocks}
    fit = size_fit("small", blocks, ByFrame([photo(0, 1280, 720)]), strength)
    assert {b.text: fit.of(b) for b in blocks}["ROOM 27K"] == 1.0


@pytest.mark.parametrize(
    "question", ["What does the small sign in these photos say?", "这些照片里的小牌子上写了什么？"]
)
def test_a_small_sign_question_retrieves_the_photo_with_the_small_text(question):
    out = stage("retrieve", top_k=1)(images=SET, query=understand(question), ocr_lines=SET_LINES)
    assert out.images[0].media_index == 2
    assert "size small: 1 text(s) printed smallest ('ROOM 27K'" in out.routes[0].reason
    plain = stage("retrieve", top_k=1)(
        images=SET, query=understand("What does the sign say?"), ocr_lines=SET_LINES
    )
    assert plain.images[0].media_index == 0  # without the size the bigger text ranks first


def test_a_big_text_question_retrieves_the_big_one():
    out = stage("retrieve", top_k=1)(
        images=SET, query=understand("What does the big banner say?"), ocr_lines=SET_LINES
    )
    assert out.images[0].media_index == 0


FRAME = photo(0, 1280, 720)
CAPTION = line("CITY NEWS LIVE", 0, 40, 40, 44)
PLATE = line("DOCK 35", 0, 700, 500, 15)
OTHER = line("BAY 12C", 0, 300, 600, 18)  # a similar small plate elsewhere in the frame


def crop_holds(crop, ln: OcrLine) -> bool:
    b = crop.box
    return b.x0 <= ln.box.x0 and b.x1 >= ln.box.x1 and b.y0 <= ln.box.y0 and b.y1 >= ln.box.y1


@pytest.mark.parametrize("question", ["What does the little plate say?", "小牌子上写着什么？"])
def test_the_small_texts_are_sent_first_and_the_larger_caption_after_them(question):
    out = stage("select_tiles")(
        images=[FRAME], query=understand(question), ocr_lines=[CAPTION, PLATE, OTHER]
    )
    # both plausible small plates first; the caption too, last: the question singles out no
    # text, so recall first sends every text the budget allows
    assert len(out.tiles) == 3 and not any(crop_holds(t, CAPTION) for t in out.tiles[:2])
    assert any(crop_holds(t, PLATE) for t in out.tiles[:2]) and any(
        crop_holds(t, OTHER) for t in out.tiles[:2]
    )
    assert crop_holds(out.tiles[2], CAPTION) and out.scores[2] < 0.5 * out.scores[0]
    reason = out.routes[-1].reason
    assert (
        "size small: 2 text(s) printed smallest" in reason and "1 other(s) ranked after" in reason
    )


def test_a_small_question_with_only_a_caption_still_sends_it():
    out = stage("select_tiles")(
        images=[FRAME], query=understand("What does the small sign say?"), ocr_lines=[CAPTION]
    )
    (crop,) = out.tiles
    assert crop_holds(crop, CAPTION)


def test_a_size_in_a_document_question_is_a_word_not_a_print_size():
    query = understand("How much does a large latte cost?")
    assert query.in_document
    page = [line("Large latte 4.20", 0, 40, 100, 20), line("CAFE MENU", 0, 40, 20, 60)]
    out = stage("select_tiles")(images=[FRAME], query=query, ocr_lines=page)
    assert "size" not in out.routes[-1].reason


@pytest.mark.slow  # real OCR on the photos it widens to
def test_a_small_sign_question_looks_further_when_only_a_caption_was_read():
    from ._render import sign, with_signs

    caption, empty, plate = (
        Image(with_signs(signs, seed=11 + i).pixels, media_index=i)
        for i, signs in enumerate(
            ([(sign("SUMMER FESTIVAL", 40), 60, 60)], [], [(sign("ROOM 27K", 16), 620, 400)])
        )
    )
    ocr = stage("ocr")
    query = understand("What is written on the little sign?")
    # whole_set=0: widening itself (a small set is otherwise read whole: test_signness)
    out = stage("find_evidence", hires_side=0, whole_set=0)(
        query=query,
        frames=[caption],
        ocr_lines=ocr(images=[caption]).lines,
        ranked=[caption, empty, plate],
    )
    assert any("27K" in ln.text for ln in out.ocr_lines)  # OCR may read the O's as zeros
    assert out.routes[-1].branch == "widened" and "printed smallest ('R" in out.routes[-1].reason
    alone = stage("find_evidence", hires_side=0, whole_set=0)(
        query=query,
        frames=[caption],
        ocr_lines=ocr(images=[caption]).lines,
        ranked=[caption, empty],
    )
    assert (
        alone.routes[-1].branch == "widened"
        and "none stands out as small" in alone.routes[-1].reason
    )
