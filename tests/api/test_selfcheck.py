"""video_qa_selfcheck: the thumbnail VLM pass runs first and its confidence steers the router.

The VLM is random-weight, so its text and confidence are noise; the checks are on what is
deterministic: the route sees the confidence, and the threshold decides the branch.
"""

import pytest

from cascade import QA

from ._media import api_media

pytestmark = pytest.mark.slow  # the shipped video pipeline with real OCR/YOLO/CLIP

# Only the confidence signal counts: need = 1 - confidence, in [0, 1).
CONFIDENCE_ONLY = {"route.intent_weight": 0, "route.text_weight": 0}


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    return api_media(tmp_path_factory.mktemp("media"))["video_0_scene"]


def _route(answer):
    (route,) = [r for r in answer.evidence.routes if "need" in r.scores]
    return route


def test_route_reads_the_thumbnail_confidence(scene):
    answer = QA.offline("video_qa_selfcheck").ask(scene.media[0], scene.question)
    trace = answer.trace
    assert trace["vlm_thumb"].status == "ran"  # every question, before the router
    route = _route(answer)
    assert 0.0 < route.scores["vlm_confidence"] <= 1.0
    assert "vlm_confidence" not in trace.counters  # a probability, not an additive counter
    assert (
        "thumbnail confidence" in route.reason and "thumbnail confidence" in trace["route"].detail
    )


def test_threshold_zero_always_escalates(scene):
    qa = QA.offline("video_qa_selfcheck", overrides={**CONFIDENCE_ONLY, "route.threshold": 0.0})
    answer = qa.ask(scene.media[0], scene.question)
    route = _route(answer)
    assert route.branch == "high_res" and 0.0 < route.scores["need"] < 1.0
    assert route.scores["need"] == pytest.approx(1.0 - route.scores["vlm_confidence"])
    assert route.reason.endswith(f"need {route.scores['need']:.2f} >= 0.0")
    assert answer.trace["full"].status == "ran"
    assert answer.trace["vlm_thumb"].status == "ran"  # paid for on every question


def test_threshold_above_any_need_never_escalates_and_the_thumbnail_answer_is_final(scene):
    # The router's threshold is capped at 1 (`le=1`); need = 1 - confidence < 1 since
    # confidence > 0, so 1.0 is already out of reach.
    qa = QA.offline("video_qa_selfcheck", overrides={**CONFIDENCE_ONLY, "route.threshold": 1.0})
    answer = qa.ask(scene.media[0], scene.question)
    route = _route(answer)
    assert route.branch == "thumbnail" and route.scores["need"] < 1.0
    assert answer.trace["full"].status == "skipped" and answer.trace["vlm_fine"].status == "skipped"
    assert answer.produced_by == "vlm"
    assert answer.bill.confidence == route.scores["vlm_confidence"]  # vlm_thumb's answer
    assert all(max(im.width, im.height) <= 224 for im in answer.evidence.images)
