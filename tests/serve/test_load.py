"""Admission under load on a real uvicorn: a burst queues instead of failing, a full queue answers
429 with Retry-After, and a client that hangs up cancels its queued or running work (499).

The small image pipeline runs the real tiny VLM; `SLEEP n` questions hold a slot for n seconds
through the `test_fault` stage that sits before the VLM (conftest.py).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import httpx
import pytest

from .conftest import IMAGES, chat, data_url, image_part, running_server, small_config, warm


@pytest.fixture(scope="module")
def img(media_dir) -> str:
    d, _ = media_dir
    return data_url((d / "text.png").read_bytes(), "image/png")


def _serve(tiny_vlm, **limits):
    from cascade.serve.app import create_app

    app = create_app(small_config(tiny_vlm, workers=2, **limits))
    warm(app)
    return app


def _metric(text: str, name: str, labels: str = "") -> float:
    m = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def _wait_until(cond, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


@pytest.mark.slow
def test_burst_of_12_at_max_concurrent_2_is_all_answered(tiny_vlm, img):
    app = _serve(tiny_vlm, max_concurrent=2)
    with running_server(app) as url:

        def ask(i: int) -> httpx.Response:
            with httpx.Client(base_url=url, timeout=120) as c:
                return c.post(
                    "/v1/chat/completions",
                    json=chat(IMAGES, f"What is written? ({i})", image_part(img)),
                )

        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(ask, range(12)))
        assert [r.status_code for r in answers] == [200] * 12, [r.text[:200] for r in answers]
        metrics = httpx.get(url + "/metrics").text
    label = f'{{model="{IMAGES}"}}'
    assert _metric(metrics, "cascade_queue_wait_seconds_count", label) == 12
    assert _metric(metrics, "cascade_queue_wait_seconds_sum", label) > 0  # some of them waited
    assert "cascade_requests_queued 0" in metrics and "cascade_requests_running 0" in metrics


@pytest.mark.slow
def test_a_full_queue_answers_429_with_retry_after(tiny_vlm, img):
    app = _serve(tiny_vlm, max_concurrent=1, max_queue=1)
    engine = app.state.engine
    with running_server(app) as url, ThreadPoolExecutor(2) as pool:

        def post(question: str) -> httpx.Response:
            return httpx.post(
                url + "/v1/chat/completions",
                json=chat(IMAGES, question, image_part(img)),
                timeout=60,
            )

        running = pool.submit(post, "SLEEP 1.5 then answer")
        _wait_until(lambda: engine.busy == 1)
        queued = pool.submit(post, "What is written?")
        _wait_until(lambda: engine.queued == 1)
        full = post("And now?")
        assert full.status_code == 429, full.text
        assert full.json()["error"]["code"] == "too_many_requests"
        assert full.json()["error"]["type"] == "rate_limit_error"
        assert int(full.headers["retry-after"]) >= 1
        assert running.result().status_code == 200 and queued.result().status_code == 200
        health = httpx.get(url + "/health").json()
    assert (health["busy"], health["queued"], health["max_queue"]) == (0, 0, 1)


def _hang_up_after(url: str, body: dict, seconds: float) -> None:
    """POST `body` on a raw socket and close it after `seconds`, without reading the answer."""
    u = urlparse(url)
    data = json.dumps(body).encode()
    with socket.create_connection((u.hostname, u.port)) as s:
        s.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: test\r\nContent-Type: "
            b"application/json\r\nContent-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data
        )
        time.sleep(seconds)


def test_a_client_that_hangs_up_is_a_499_and_its_work_stops(tiny_vlm, img):
    app = _serve(tiny_vlm, max_concurrent=1)
    engine = app.state.engine
    with running_server(app) as url:
        before = httpx.get(url + "/metrics").text
        # The first request runs (its fault stage sleeps), the second waits in the queue; both
        # clients hang up. The first stops before the VLM stage, the second never starts.
        first = threading.Thread(
            target=_hang_up_after, args=(url, chat(IMAGES, "SLEEP 1.0 first", image_part(img)), 0.6)
        )
        first.start()
        _wait_until(lambda: engine.busy == 1)
        _hang_up_after(url, chat(IMAGES, "SLEEP 1.0 second", image_part(img)), 0.3)
        first.join()
        _wait_until(lambda: engine.busy == 0 and engine.queued == 0)
        after = httpx.get(url + "/metrics").text
        ok = httpx.post(
            url + "/v1/chat/completions",
            json=chat(IMAGES, "Still there?", image_part(img)),
            timeout=60,
        )
    label = f'{{model="{IMAGES}",status="499"}}'
    assert _metric(after, "cascade_requests_total", label) == 2
    assert _metric(after, "cascade_requests_total", f'{{model="{IMAGES}",status="500"}}') == 0
    answers = f'{{model="{IMAGES}",produced_by="vlm"}}'
    assert _metric(after, "cascade_answers_total", answers) == _metric(
        before, "cascade_answers_total", answers
    )
    assert ok.status_code == 200
