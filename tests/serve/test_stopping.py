"""`cascade serve` stopped by SIGTERM or SIGINT: the requests in flight are answered, then the
process exits 0, within the drain bound. A real server process (started outside the repository
root, see conftest.child_dir) whose pipeline holds each request a known time (`SLEEP` questions
to the `test_fault` stage, which the process imports before running `cascade.cli.main`).
The Ray variant is in test_ray_cli.py."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import httpx
import numpy as np
import pytest

from .conftest import (
    IMAGES,
    PIPELINES,
    chat,
    child_env,
    data_url,
    free_port,
    image_part,
    png_bytes,
)

pytestmark = pytest.mark.slow
HOLD_S = 3.0  # each request's time in the pipeline


def start_server(child_dir, tiny_vlm: str, *flags: str) -> tuple[subprocess.Popen, str]:
    """`cascade serve` serving images_small (the fault stage imported first), once ready."""
    port = free_port()
    argv = [
        "serve",
        "--model",
        tiny_vlm,
        "--no-shipped",
        "--pipeline",
        f"images_small={PIPELINES / 'images_small.yaml'}",
        "--port",
        str(port),
        *flags,
    ]
    code = (
        "import sys, tests.serve.fault_stage; from cascade.cli import main; "
        f"sys.exit(main({argv!r}))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=child_dir,
        env=child_env(child_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while True:
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.monotonic() < deadline, "cascade serve did not become ready"
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.2)


def in_flight(url: str, n: int) -> tuple[list, list[threading.Thread]]:
    """`n` requests that each hold the pipeline HOLD_S seconds, sent now; (their responses, as
    they come, and their threads)."""
    image = image_part(data_url(png_bytes(np.zeros((32, 32, 3), np.uint8)), "image/png"))
    answers: list = []

    def ask(i: int) -> None:
        body = chat(IMAGES, f"SLEEP {HOLD_S} what {i}?", image, max_tokens=2)
        try:
            answers.append(httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120))
        except httpx.HTTPError as e:
            answers.append(e)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while httpx.get(f"{url}/health", timeout=5).json()["busy"] < n:  # all running now
        assert time.monotonic() < deadline, "the requests never ran"
        time.sleep(0.05)
    return answers, threads


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_drains_the_requests_in_flight_then_exits_0(child_dir, tiny_vlm, sig):
    proc, url = start_server(child_dir, tiny_vlm, "--drain-timeout", "20")
    try:
        answers, threads = in_flight(url, 2)
        t0 = time.monotonic()
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
        stopped_after = time.monotonic() - t0
        for t in threads:
            t.join(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out[-3000:]
    assert [getattr(a, "status_code", a) for a in answers] == [200, 200], answers
    assert stopped_after < 20, stopped_after  # drained, not timed out


def test_the_drain_is_bounded(child_dir, tiny_vlm):
    """A request longer than --drain-timeout does not keep the server serving: at the bound it
    is answered 503 (shutting_down), its run is cancelled, and the process still exits 0."""
    proc, url = start_server(child_dir, tiny_vlm, "--drain-timeout", "1")
    try:
        answers, threads = in_flight(url, 1)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(timeout=30)
        cut_after = time.monotonic() - t0
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out[-3000:]
    assert answers[0].status_code == 503, answers  # cut off at the bound, not answered
    assert answers[0].json()["error"]["code"] == "shutting_down"
    assert cut_after < HOLD_S, cut_after
