"""Recall first, on media rendered here and read by the real OCR: a time-order question sends the
sign shown after the named event; a colour question sends the sign of that colour (both when the
colour is not there); a tool answers only when the attributes single one out."""

from __future__ import annotations

import pytest

import cascade.stages  # noqa: F401
from cascade.evidence.understanding import understand
from cascade.models import Models
from cascade.registry import get_stage_class
from cascade.vlm import build_tiny_vlm

from ._render import sign, with_signs

pytestmark = pytest.mark.slow  # real OCR on a few frames

MODELS = Models({"vlm": {"id": str(build_tiny_vlm(size="test"))}})  # prices crops; no weights
RED, BLUE, WHITE = (200, 30, 30), (20, 60, 160), (250, 250, 250)


def stage(name: str, **params):
    return get_stage_class(name)(params, models=MODELS)


def readers():
    ocr = stage("ocr")
    return lambda images: ocr(images=images).lines


def sent_texts(tiles) -> str:
    read = readers()
    return " ".join(ln.text for ln in read([t for t in tiles]))


@pytest.fixture(scope="module")
def timeline():
    """A small sign at 1 s, a big banner at 3-4 s, another small sign at 6 s."""
    before, after = sign("DOCK 7", 22), sign("BAY 12", 22)
    banner = sign("GRAND OPENING", 64, plate=(250, 210, 40))
    frames = [
        with_signs([(before, 600, 380)], t=1.0, seed=1),
        with_signs([], t=2.0, seed=2),
        with_signs([(banner, 150, 100)], t=3.0, seed=3),
        with_signs([(banner, 150, 100)], t=4.0, seed=4),
        with_signs([], t=5.0, seed=5),
        with_signs([(after, 100, 420)], t=6.0, seed=6),
    ]
    return frames, readers()(frames)


@pytest.mark.parametrize(
    "question",
    [
        "What does the small sign that appears after the big banner say?",
        "大横幅之后出现的小牌子上写着什么？",
    ],
)
def test_time_order_sends_the_sign_after_the_event(timeline, question):
    frames, lines = timeline
    query = understand(question)
    out = stage("retrieve", top_k=1)(images=frames, query=query, ocr_lines=lines)
    assert out.images[0].timestamp == 6.0
    assert "anchor the tallest text 'GRAND OPENING' first seen at 3.0" in out.routes[0].reason
    fine = [f for f in frames if f.timestamp in (4.0, 6.0)]  # the banner may share the fetch
    crops = stage("select_tiles")(images=fine, query=query, ocr_lines=readers()(fine))
    text = sent_texts(crops.tiles)
    assert "BAY 12" in text and "DOCK" not in text
    tool = stage("tool_answer")(query=query, ocr_lines=readers()(fine), images=fine)
    assert tool.answer is not None and tool.answer.text == "BAY 12"


def test_before_sends_the_earlier_sign_and_first_the_first(timeline):
    frames, lines = timeline
    before = stage("retrieve", top_k=1)(
        images=frames,
        ocr_lines=lines,
        query=understand("What did the small sign say before the big banner?"),
    )
    assert before.images[0].timestamp == 1.0
    first = stage("retrieve", top_k=1)(
        images=frames, ocr_lines=lines, query=understand("What does the first sign say?")
    )
    assert first.images[0].timestamp == 1.0


@pytest.fixture(scope="module")
def two_signs():
    image = with_signs(
        [
            (sign("EXIT 4", 26, plate=RED, ink=WHITE), 120, 200),
            (sign("EXIT 9", 26, plate=BLUE, ink=WHITE), 640, 260),
        ],
        seed=7,
        size=(1280, 720),
    )
    return image, readers()([image])


@pytest.mark.parametrize(
    "question,colour_text",
    [("What does the red sign say?", "EXIT 4"), ("蓝色的牌子上写着什么？", "EXIT 9")],
)
def test_a_colour_question_sends_the_sign_of_that_colour(two_signs, question, colour_text):
    image, lines = two_signs
    query = understand(question)
    crops = stage("select_tiles")(images=[image], query=query, ocr_lines=lines)
    text = sent_texts(crops.tiles)
    other = {"EXIT 4", "EXIT 9"} - {colour_text}
    assert colour_text in text and not any(o in text for o in other)
    assert f"on a {query.colour} plate" in crops.routes[-1].reason
    tool = stage("tool_answer")(query=query, ocr_lines=lines, images=[image])
    assert tool.answer.text == colour_text


def test_a_colour_not_there_sends_both_signs_and_the_tool_abstains(two_signs):
    image, lines = two_signs
    query = understand("What does the green sign say?")
    crops = stage("select_tiles")(images=[image], query=query, ocr_lines=lines)
    text = sent_texts(crops.tiles)
    assert "EXIT 4" in text and "EXIT 9" in text
    assert "no plate of that colour" in crops.routes[-1].reason
    tool = stage("tool_answer")(query=query, ocr_lines=lines, images=[image])
    assert tool.answer is None and "do not single out" in tool.route.reason
    assert "EXIT 4" in tool.hint and "EXIT 9" in tool.hint
