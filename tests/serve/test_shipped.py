"""The shipped pipelines behind the server with the random-weight tiny VLM (`--tiny`), end to end.

VLM answers are noise here; what is checked is real: the request path, tool answers (OCR), the
evidence, the bill against the full-resolution baseline, and the cache hits of a follow-up turn.
"""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from openai import OpenAI

from .conftest import chat, data_url, image_part, png_bytes, running_server, video_part

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server():
    from cascade.serve.app import create_app
    from cascade.serve.config import ServeConfig

    app = create_app(ServeConfig(tiny=True, workers=1))
    engine = app.state.engine
    with running_server(app) as url, httpx.Client(base_url=url, timeout=300) as client:
        yield client, engine, OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=300)


def _served(engine, model: str) -> None:
    assert model in engine.models, (
        f"{model} is not served: {engine.skipped.get(model.split('/')[-1])}"
    )


def test_video_qa_bill_evidence_and_follow_up_cache(server, media_dir):
    client, engine, _ = server
    _served(engine, "cascade/video_qa")
    d, truth = media_dir
    first = chat(
        "cascade/video_qa",
        "What does the sign say?",
        video_part(data_url((d / "sign.mp4").read_bytes(), "video/mp4")),
    )
    r1 = client.post("/v1/chat/completions", json=first)
    assert r1.status_code == 200, r1.text
    b1 = r1.json()
    bill = b1["cascade"]["bill"]
    assert bill["baseline_visual_tokens"] > bill["visual_tokens"]
    assert b1["cascade"]["evidence"]["routes"], "the route decision is part of the evidence"
    assert b1["usage"]["prompt_tokens"] == (
        0 if bill["produced_by"] == "tool" else bill["visual_tokens"] + bill["text_tokens"]
    )
    follow = {
        "model": "cascade/video_qa",
        "messages": first["messages"]
        + [
            {"role": "assistant", "content": b1["choices"][0]["message"]["content"]},
            {"role": "user", "content": "What does the sign say? Answer again."},
        ],
    }
    r2 = client.post("/v1/chat/completions", json=follow)
    assert r2.status_code == 200, r2.text
    counters = r2.json()["cascade"]["trace"]["counters"]
    assert any(k.endswith("_cache_hits") and v > 0 for k, v in counters.items()), counters
    metrics = client.get("/metrics").text
    assert "cascade_cache_hit_ratio" in metrics


def test_doc_qa_reads_text_with_the_real_ocr(server):
    from cascade.eval.render import render_text_image

    client, engine, _ = server
    _served(engine, "cascade/doc_qa")
    url = data_url(png_bytes(render_text_image("OPEN 24 HOURS", font_size=40)), "image/png")
    r = client.post(
        "/v1/chat/completions",
        json=chat("cascade/doc_qa", "What does the text say?", image_part(url)),
    )
    assert r.status_code == 200, r.text
    body = r.json()
    lines = [ln["text"] for ln in body["cascade"]["evidence"]["ocr_lines"]]
    assert any("OPEN" in t and "HOURS" in t for t in lines), lines
    if body["cascade"]["produced_by"] == "tool":
        assert "OPEN 24 HOURS" in body["choices"][0]["message"]["content"]
        assert body["usage"]["prompt_tokens"] == 0


def _media_part(engine, model: str, video: str, image: str) -> dict:
    kinds = set(engine.models[model].media_types.values())
    if kinds & {"video", "path"} and not kinds & {"images", "image"}:
        return {"type": "video_url", "video_url": {"url": video}}
    return {"type": "image_url", "image_url": {"url": image}}


def test_max_tokens_reaches_the_vlm_on_every_shipped_pipeline(server, media_dir):
    client, engine, oai = server
    d, _ = media_dir
    video = data_url((d / "sign.mp4").read_bytes(), "video/mp4")
    rng = np.random.default_rng(5)  # a photo-like image with no text: nothing for OCR to answer
    image = data_url(png_bytes((rng.random((240, 320, 3)) * 255).astype(np.uint8)), "image/png")
    by_vlm = set()
    for model in engine.models:
        part = _media_part(engine, model, video, image)
        messages = [
            {
                "role": "user",
                "content": [part, {"type": "text", "text": "Describe the scene in detail."}],
            }
        ]
        r = oai.chat.completions.create(model=model, max_tokens=3, messages=messages)
        extra = r.model_extra["cascade"]
        assert r.usage.completion_tokens <= 3, model
        if extra["produced_by"] == "vlm":
            by_vlm.add(part["type"])
            assert extra["bill"]["completion_tokens"] == r.usage.completion_tokens > 0
            if r.usage.completion_tokens == 3:
                assert r.choices[0].finish_reason == "length", model
    assert by_vlm == {"video_url", "image_url"}, "the VLM answered on image and video pipelines"


def test_selfcheck_streams_its_final_answer_only(server, media_dir):
    client, engine, oai = server
    _served(engine, "cascade/video_qa_selfcheck")
    d, _ = media_dir
    video = data_url((d / "sign.mp4").read_bytes(), "video/mp4")
    for question in ("Describe the scene in detail.", "What does the sign say?"):
        messages = [
            {
                "role": "user",
                "content": [
                    {"type": "video_url", "video_url": {"url": video}},
                    {"type": "text", "text": question},
                ],
            }
        ]
        plain = oai.chat.completions.create(model="cascade/video_qa_selfcheck", messages=messages)
        chunks = list(
            oai.chat.completions.create(
                model="cascade/video_qa_selfcheck", messages=messages, stream=True
            )
        )
        # The thumbnail draft never streams: what arrives is the final answer, whichever
        # stage gave it (the draft itself on the thumbnail branch, sent whole).
        assert (
            "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            == plain.choices[0].message.content
        )
        produced_by = plain.model_extra["cascade"]["produced_by"]
        assert chunks[-1].model_extra["cascade"]["produced_by"] == produced_by


def test_a_tool_answer_streams_at_once(server):
    from cascade.eval.render import render_text_image

    client, engine, oai = server
    _served(engine, "cascade/doc_qa")
    url = data_url(png_bytes(render_text_image("TOTAL 42.50", font_size=40)), "image/png")
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": url}},
                {"type": "text", "text": "What is the total?"},
            ],
        }
    ]
    chunks = list(
        oai.chat.completions.create(
            model="cascade/doc_qa",
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish[0].model_extra["cascade"]["produced_by"] == "tool"
    content = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(content) == 1 and "42.50" in content[0]
    assert chunks[-1].usage.completion_tokens == 0 and chunks[-1].usage.prompt_tokens == 0
