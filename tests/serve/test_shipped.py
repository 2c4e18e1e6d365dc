"""The shipped pipelines behind the server with the random-weight tiny VLM (`--tiny`), end to end.

VLM answers are noise here; what is checked is real: the request path, tool answers (OCR), the
evidence, the bill against the full-resolution baseline, and the cache hits of a follow-up turn.
"""
from __future__ import annotations

import httpx
import pytest

from .conftest import chat, data_url, image_part, png_bytes, running_server, video_part

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server():
    from cascade.serve.app import create_app
    from cascade.serve.config import ServeConfig

    app = create_app(ServeConfig(tiny=True, workers=1))
    engine = app.state.engine
    with running_server(app) as url, httpx.Client(base_url=url, timeout=300) as client:
        yield client, engine


def _served(engine, model: str) -> None:
    assert model in engine.models, f"{model} is not served: {engine.skipped.get(model.split('/')[-1])}"


def test_video_qa_bill_evidence_and_follow_up_cache(server, media_dir):
    client, engine = server
    _served(engine, "cascade/video_qa")
    d, truth = media_dir
    first = chat("cascade/video_qa", "What does the sign say?",
                 video_part(data_url((d / "sign.mp4").read_bytes(), "video/mp4")))
    r1 = client.post("/v1/chat/completions", json=first)
    assert r1.status_code == 200, r1.text
    b1 = r1.json()
    bill = b1["cascade"]["bill"]
    assert bill["baseline_visual_tokens"] > bill["visual_tokens"]
    assert b1["cascade"]["evidence"]["routes"], "the route decision is part of the evidence"
    assert b1["usage"]["prompt_tokens"] == (0 if bill["produced_by"] == "tool"
                                            else bill["visual_tokens"] + bill["text_tokens"])
    follow = {"model": "cascade/video_qa", "messages": first["messages"] + [
        {"role": "assistant", "content": b1["choices"][0]["message"]["content"]},
        {"role": "user", "content": "What does the sign say? Answer again."}]}
    r2 = client.post("/v1/chat/completions", json=follow)
    assert r2.status_code == 200, r2.text
    counters = r2.json()["cascade"]["trace"]["counters"]
    assert any(k.endswith("_cache_hits") and v > 0 for k, v in counters.items()), counters
    metrics = client.get("/metrics").text
    assert "cascade_cache_hit_ratio" in metrics


def test_doc_qa_reads_text_with_the_real_ocr(server):
    from cascade.media_gen import render_text_image

    client, engine = server
    _served(engine, "cascade/doc_qa")
    url = data_url(png_bytes(render_text_image("OPEN 24 HOURS", font_size=40)), "image/png")
    r = client.post("/v1/chat/completions", json=chat("cascade/doc_qa", "What does the text say?",
                                                      image_part(url)))
    assert r.status_code == 200, r.text
    body = r.json()
    lines = [l["text"] for l in body["cascade"]["evidence"]["ocr_lines"]]
    assert any("OPEN" in t and "HOURS" in t for t in lines), lines
    if body["cascade"]["produced_by"] == "tool":
        assert "OPEN 24 HOURS" in body["choices"][0]["message"]["content"]
        assert body["usage"]["prompt_tokens"] == 0
