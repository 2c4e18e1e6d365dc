"""The product path: a question about a video or images through the shipped pipelines.

VLM and CLIP are random-weight (real architectures); OCR (RapidOCR) and YOLO11n are real, so tool
answers, routes, evidence and token bills are asserted exactly, VLM text is not.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cascade import QA, Frame, InputError, MultiImageQA, SpecError, VideoQA

from ._media import api_media

pytestmark = pytest.mark.slow  # the shipped pipelines with real OCR/YOLO on generated media

CASCADE = str(Path(sys.executable).parent / "cascade")


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    return api_media(tmp_path_factory.mktemp("media"))


@pytest.fixture(scope="module")
def video_qa():
    return VideoQA.offline()


def test_reading_question_is_answered_by_ocr_from_the_sign_frames(video_qa, items):
    it = items["video_1_read"]  # 16-px text: unreadable on a thumbnail
    answer = video_qa.ask(it.media[0], it.question)
    assert (
        answer.text == "12" and answer.produced_by == "tool"
    )  # the number asked for, not the line
    assert answer.evidence.routes[0].reason.startswith("understood: sign answer=number")
    frames = [im for im in answer.evidence.images if isinstance(im, Frame)]
    sign_times = {i / 4 for i in it.frames}
    assert any(f.timestamp in sign_times for f in frames)  # (the bus frames have text too)
    assert all(f.width == 640 for f in frames)  # fetched again at full resolution
    assert answer.bill.visual_tokens == 0 and answer.bill.baseline_visual_tokens > 4000
    route = answer.trace["route"]
    assert route.detail.startswith("branch=high_res") and "intent read" in route.detail
    assert (
        answer.trace["vlm_thumb"].status == "skipped"
        and answer.trace["vlm_fine"].status == "skipped"
    )


def test_counting_question_is_answered_by_the_detector(video_qa, items):
    it = items["video_0_count"]
    answer = video_qa.ask(it.media[0], it.question)
    assert (answer.text, answer.produced_by) == ("4", "tool")
    assert {d.label for d in answer.evidence.detections} == {"person"}


def test_scene_question_stays_on_thumbnails_and_session_reuses_caches(video_qa, items):
    it = items["video_0_scene"]
    session = video_qa.session(it.media[0])
    first = session.ask(it.question)
    assert first.produced_by == "vlm"
    # understanding, the path (a video cascades), retrieval, router
    routes = [r.branch for r in first.evidence.routes]
    assert routes == ["understood", "cascade", "scene", "thumbnail"]
    assert first.evidence.routes[0].reason.startswith("understood: scene")
    assert all(max(im.width, im.height) <= 224 for im in first.evidence.images)
    tokens, baseline = first.bill.visual_tokens, first.bill.baseline_visual_tokens
    assert 0 < tokens * 10 <= baseline  # >= 10x fewer visual tokens than full resolution
    assert first.bill.prefill_savings > 10
    second = session.ask("Describe what the animal is doing.")
    counters = second.trace.counters
    assert counters["kv_cache_hits"] == 1 and counters.get("vision_tower_calls", 0) == 0
    assert counters["embed_cache_hits"] > 0 and counters.get("embed_images", 0) == 0
    assert len(session.turns) == 2
    # the first turn is in the second's prompt (after the media: the prefix still hit)
    alone = video_qa.ask(it.media[0], "Describe what the animal is doing.")
    assert second.bill.prompt_tokens > alone.bill.prompt_tokens
    # a turn's tokens stream to on_token as generated; max_new_tokens caps them
    events = []
    third = session.ask("And then?", on_token=events.append, max_new_tokens=2)
    assert len(events) == third.bill.generated_tokens == 2
    assert third.text.startswith("".join(e.text for e in events))
    assert session.questions == [it.question, "Describe what the animal is doing.", "And then?"]


def test_multi_image_reading_finds_the_small_price_tag(items):
    it = items["images_read"]
    answer = MultiImageQA.offline().ask(list(it.media), it.question)
    assert answer.produced_by == "tool" and answer.text == "3.50"  # the price, not the tag
    assert all(line.media_index == 1 for line in answer.evidence.ocr_lines)


def test_doc_qa_reads_the_page(tmp_path):
    from PIL import Image as PILImage

    from cascade.eval.render import render_text_image

    page = render_text_image("INVOICE 2291   TOTAL DUE 118.40 EUR", font_size=22, size=(900, 1200))
    PILImage.fromarray(page).save(tmp_path / "page.png")
    answer = QA.offline("doc_qa").ask(
        tmp_path / "page.png", "What is the total due on the invoice?"
    )
    assert answer.produced_by == "tool" and "118.40" in answer.text


def test_baselines_take_video_or_images(items):
    it = items["video_0_scene"]
    full = QA.offline("full_res").ask(it.media[0], it.question)
    thumb = QA.offline("thumbnail_only").ask(it.media[0], it.question)
    assert full.bill.visual_tokens == full.bill.baseline_visual_tokens
    assert full.bill.vision_flops == full.bill.baseline_vision_flops
    assert thumb.bill.visual_tokens * 4 < full.bill.visual_tokens
    assert thumb.bill.baseline_visual_tokens == full.bill.baseline_visual_tokens  # the same frames
    photos = list(items["images_scene"].media)
    images = QA.offline("thumbnail_only").ask(photos, "Which is a cat?")
    assert images.produced_by == "vlm" and len(images.evidence.images) == len(photos)
    assert all(max(im.width, im.height) == 224 for im in images.evidence.images)
    assert images.trace["frames"].status == "skipped" and images.trace["imgs"].status == "ran"


def test_bad_inputs_are_clear(video_qa, tmp_path):
    with pytest.raises(InputError, match="question must be a non-empty string"):
        video_qa.ask("x.mp4", "  ")
    with pytest.raises(InputError, match="file not found"):
        video_qa.ask(tmp_path / "missing.mp4", "what?")
    with pytest.raises(
        SpecError, match="route_demo.yaml: pipeline 'route_demo' has no 'answer' output"
    ):
        QA("route_demo")


def test_cli_runs_video_qa_on_a_generated_video(items):
    it = items["video_1_read"]
    out = subprocess.run(
        [
            CASCADE,
            "run",
            "video_qa",
            "--offline",
            "--json",
            "-i",
            f"video={it.media[0]}",
            "-i",
            f"question={it.question}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["outputs"]["answer"]["text"] == "12"  # the gate number asked for
    status = {s["name"]: s["status"] for s in result["trace"]["stages"]}
    assert status["vlm_thumb"] == "skipped" and status["ocr"] == "ran"
