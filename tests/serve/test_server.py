"""The HTTP server end to end on a real uvicorn: formats, limits, errors, concurrency, metrics.

Uses the small test pipelines (conftest.py): the real `vlm_answer` stage on the random-weight tiny
Qwen2-VL, with a `test_fault` stage in front for timeouts and crashes. Answers are random text, so
only their shape is checked; token counts, the bill and the KV cache are real. The shipped
pipelines are exercised in test_shipped.py.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

from cascade.vlm.families import ImageLimits, load_family

from .conftest import (
    IMAGES,
    VIDEO,
    VLM_MAX_PIXELS,
    chat,
    data_url,
    image_part,
    png_bytes,
    running_server,
    small_config,
    video_part,
    warm,
)


def visual_tokens(model: str, sizes, **limits) -> int:
    """What the model's family says these images cost (its processor's own resize rule)."""
    family = load_family(model, ImageLimits(**limits))
    return sum(family.visual_tokens(w, h) for w, h in sizes)


@pytest.fixture(scope="module")
def server(media_dir, tmp_path_factory, tiny_vlm):
    from cascade.serve.app import create_app

    d, truth = media_dir
    cfg = small_config(
        tiny_vlm,
        media_root=d,
        upload_dir=tmp_path_factory.mktemp("uploads"),
        max_upload_bytes=3 << 20,
        max_pixels=1_000_000,
        max_frames=500,
        request_timeout_s=60.0,
        max_concurrent=8,
        workers=4,
    )
    app = create_app(cfg)
    warm(app)
    with running_server(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        yield client, app, d, truth


@pytest.fixture(scope="module")
def video_url(media_dir):
    d, _ = media_dir
    return data_url((d / "sign.mp4").read_bytes(), "video/mp4")


def _error(r: httpx.Response, status: int, code: str | None = None) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    if code:
        assert err["code"] == code, err
    return err


def test_models_health_and_index(server):
    client, *_ = server
    models = client.get("/v1/models").json()
    assert models["object"] == "list"
    assert {m["id"] for m in models["data"]} == {VIDEO, IMAGES}
    assert all(m["object"] == "model" for m in models["data"])
    h = client.get("/health").json()
    assert h["status"] == "ok" and VIDEO in h["models"]
    _error(client.get("/no/such/route"), 404)


def test_video_completion_has_usage_and_cascade_extra(server, video_url, tiny_vlm):
    client, *_ = server
    r = client.post(
        "/v1/chat/completions", json=chat(VIDEO, "What does the sign say?", video_part(video_url))
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert body["model"] == VIDEO
    msg = body["choices"][0]
    assert msg["message"]["role"] == "assistant"
    assert isinstance(msg["message"]["content"], str) and msg["message"]["content"]
    assert msg["finish_reason"] in ("stop", "length")
    cas = body["cascade"]
    bill, usage, counters = cas["bill"], body["usage"], cas["trace"]["counters"]
    images = cas["evidence"]["images"]
    assert len(images) == 6 and all("timestamp" in im for im in images)
    # The VLM's real visual token count: Qwen2-VL's resize of each 224x168 thumbnail under the
    # stage's max_pixels; the baseline is every sampled frame at full resolution.
    assert {(im["width"], im["height"]) for im in images} == {(224, 168)}
    assert (
        bill["visual_tokens"]
        == counters["visual_tokens"]
        == visual_tokens(
            tiny_vlm, [(im["width"], im["height"]) for im in images], max_pixels=VLM_MAX_PIXELS
        )
    )
    assert (
        bill["baseline_visual_tokens"]
        == counters["baseline_visual_tokens"]
        == visual_tokens(tiny_vlm, [im["source_size"] for im in images], resolution="full")
    )
    assert bill["baseline_visual_tokens"] > bill["visual_tokens"] > 0
    assert bill["text_tokens"] == counters["prompt_tokens"] > 0
    assert usage["prompt_tokens"] == bill["visual_tokens"] + bill["text_tokens"]
    assert (
        usage["completion_tokens"] == bill["completion_tokens"] == counters["generated_tokens"] > 0
    )
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert bill["prefill_flops"] == counters["prefill_flops"] > 0
    assert bill["prefill_savings"] > 1
    assert [s["name"] for s in cas["trace"]["stages"]] == [
        "fault",
        "frames",
        "thumbs",
        "vlm",
        "answer",
    ]


def test_follow_up_turn_hits_the_cache(server, media_dir, tiny_vlm):
    client, *_ = server
    d, _ = media_dir
    url = data_url(png_bytes(np.full((64, 96, 3), 7, np.uint8)), "image/png")
    first = chat(IMAGES, "What is this?", image_part(url))
    r1 = client.post("/v1/chat/completions", json=first).json()
    follow = {
        "model": IMAGES,
        "messages": first["messages"]
        + [
            {"role": "assistant", "content": r1["choices"][0]["message"]["content"]},
            {"role": "user", "content": "And what colour is it?"},
        ],
    }
    r2 = client.post("/v1/chat/completions", json=follow).json()
    # The real KV prefix cache of the VLM: the second turn reuses the image's prefix.
    c1, c2 = r1["cascade"]["trace"]["counters"], r2["cascade"]["trace"]["counters"]
    assert (
        r1["cascade"]["bill"]["kv_cache"] == "miss" and r2["cascade"]["bill"]["kv_cache"] == "hit"
    )
    assert (c1["kv_cache_misses"], c1["kv_cache_hits"], c1["vision_tower_calls"]) == (1, 0, 1)
    assert (c2["kv_cache_misses"], c2["kv_cache_hits"], c2["vision_tower_calls"]) == (0, 1, 0)
    visual = visual_tokens(tiny_vlm, [(96, 64)], max_pixels=VLM_MAX_PIXELS)
    assert (
        r1["cascade"]["bill"]["visual_tokens"] == r2["cascade"]["bill"]["visual_tokens"] == visual
    )
    assert r1["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    # the cached prefix: the image's tokens and the template text before the question
    assert (
        visual
        < r2["usage"]["prompt_tokens_details"]["cached_tokens"]
        < r2["usage"]["prompt_tokens"]
    )
    metrics = client.get("/metrics").text
    assert 'cascade_cache_hits_total{cache="kv_prefix"}' in metrics
    assert 'cascade_cache_hit_ratio{cache="kv_prefix"}' in metrics


def test_streaming_chunks_and_done(server, video_url):
    client, *_ = server
    plain = client.post(
        "/v1/chat/completions", json=chat(VIDEO, "What does the sign say?", video_part(video_url))
    ).json()
    body = chat(
        VIDEO,
        "What does the sign say?",
        video_part(video_url),
        stream=True,
        stream_options={"include_usage": True},
    )
    with client.stream("POST", "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        lines = [ln for ln in r.iter_lines() if ln]
    assert all(ln.startswith("data: ") for ln in lines) and lines[-1] == "data: [DONE]"
    chunks = [json.loads(ln[6:]) for ln in lines[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    # Greedy decoding: the streamed text is the non-streamed answer, whatever the random weights
    # say.
    assert text and text == plain["choices"][0]["message"]["content"]
    finish = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert len(finish) == 1
    assert finish[0]["choices"][0]["finish_reason"] == plain["choices"][0]["finish_reason"]
    assert "bill" in finish[0]["cascade"]
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == [] and usage["total_tokens"] > 0
    assert usage["prompt_tokens"] == plain["usage"]["prompt_tokens"]
    assert usage["completion_tokens"] == plain["usage"]["completion_tokens"]


def test_file_url_under_media_root(server):
    client, _, d, _ = server
    r = client.post(
        "/v1/chat/completions", json=chat(IMAGES, "Read it", image_part((d / "text.png").as_uri()))
    )
    assert r.status_code == 200, r.text
    r = client.post(
        "/v1/chat/completions", json=chat(VIDEO, "Sign?", video_part((d / "sign.mp4").as_uri()))
    )
    assert r.status_code == 200, r.text


def _bad_requests(d, video_url) -> list[tuple[str, dict | bytes, int, str]]:
    img = data_url((d / "text.png").read_bytes(), "image/png")
    big = png_bytes(np.zeros((1001, 1000, 3), np.uint8))
    return [
        ("bad json", b'{"model": ', 400, "invalid_json"),
        ("not an object", b"[1, 2]", 400, "invalid_json"),
        ("unknown model", chat("cascade/nope", "q?", image_part(img)), 404, "model_not_found"),
        ("no question", chat(IMAGES, "", image_part(img)), 400, "no_question"),
        ("no media", chat(IMAGES, "what?"), 400, "missing_media"),
        (
            "video to an image pipeline",
            chat(IMAGES, "what?", video_part(video_url)),
            400,
            "wrong_media",
        ),
        (
            "corrupt image",
            chat(IMAGES, "q?", image_part(data_url((d / "corrupt.png").read_bytes(), "image/png"))),
            400,
            "invalid_image",
        ),
        (
            "corrupt video",
            chat(VIDEO, "q?", video_part(data_url((d / "corrupt.mp4").read_bytes(), "video/mp4"))),
            400,
            "invalid_video",
        ),
        (
            "outside media root",
            chat(IMAGES, "q?", image_part("file:///etc/hostname")),
            400,
            "file_url_not_allowed",
        ),
        (
            "traversal",
            chat(IMAGES, "q?", image_part(f"file://{d}/../../etc/hostname")),
            400,
            "file_url_not_allowed",
        ),
        (
            "remote url",
            chat(IMAGES, "q?", image_part("http://127.0.0.1:1/x.png")),
            400,
            "invalid_url",
        ),
        (
            "too many pixels",
            chat(IMAGES, "q?", image_part(data_url(big, "image/png"))),
            413,
            "image_too_large",
        ),
        (
            "oversized upload",
            chat(IMAGES, "q?", image_part("data:image/png;base64," + "A" * (5 << 20))),
            413,
            "upload_too_large",
        ),
        ("stage crash", chat(IMAGES, "CRASH now", image_part(img)), 500, "pipeline_error"),
    ]


def test_each_bad_request_gets_a_clear_error(server, video_url):
    client, _, d, _ = server
    for name, body, status, code in _bad_requests(d, video_url):
        kw = {"content": body} if isinstance(body, bytes) else {"json": body}
        err = _error(client.post("/v1/chat/completions", **kw), status, code)
        assert "Traceback" not in err["message"], name
    assert client.get("/health").json()["status"] == "ok"


@pytest.mark.slow
def test_concurrent_good_and_bad_requests(server, video_url):
    client, _, d, _ = server
    img = data_url((d / "text.png").read_bytes(), "image/png")
    good = [
        ("good video", chat(VIDEO, "What does the sign say?", video_part(video_url)), 200, None),
        ("good image", chat(IMAGES, "What is written?", image_part(img)), 200, None),
    ] * 3
    cases = good + _bad_requests(d, video_url)

    def send(case):
        name, body, status, code = case
        kw = {"content": body} if isinstance(body, bytes) else {"json": body}
        with httpx.Client(base_url=str(client.base_url), timeout=60) as c:
            return case, c.post("/v1/chat/completions", **kw)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(send, cases))
    for (name, _, status, code), r in results:
        assert r.status_code == status, (name, r.text)
        if status == 200:
            content = r.json()["choices"][0]["message"]["content"]
            assert isinstance(content, str) and content, name
        else:
            assert r.json()["error"]["code"] == code, name
    metrics = client.get("/metrics").text
    assert f'cascade_requests_total{{model="{VIDEO}",status="200"}}' in metrics
    assert 'cascade_requests_total{model="unknown",status="400"}' in metrics
    assert "cascade_request_latency_seconds_count" in metrics
    assert f'cascade_visual_tokens_saved{{model="{VIDEO}"}}' in metrics


@pytest.mark.slow
def test_timeout_gives_504_and_the_server_keeps_serving(media_dir, tiny_vlm):
    from fastapi.testclient import TestClient

    from cascade.serve.app import create_app

    d, _ = media_dir
    app = create_app(small_config(tiny_vlm, request_timeout_s=2.0, workers=2))
    warm(app)
    img = data_url((d / "text.png").read_bytes(), "image/png")
    with TestClient(app) as client:
        _error(
            client.post(
                "/v1/chat/completions", json=chat(IMAGES, "SLEEP 4 then answer", image_part(img))
            ),
            504,
            "timeout",
        )
        for _ in range(300):  # the timed-out run keeps its slot until it really ends
            if not app.state.engine.busy:
                break
            threading.Event().wait(0.02)
        r = client.post(
            "/v1/chat/completions", json=chat(IMAGES, "What is written?", image_part(img))
        )
        assert r.status_code == 200, r.text
