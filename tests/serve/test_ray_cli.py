"""`cascade serve --ray` as a user runs it: its own local Ray cluster, two VLM replicas, the
official `openai` client; ^C shuts Serve and the cluster down. (Runs before test_ray_serve.py's
cluster starts: one cluster at a time.)"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("ray", reason="ray[serve] is not installed (pip install 'vlm-cascade[ray]')")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")

from .conftest import PIPELINES, child_env, data_url, free_port, png_bytes  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.timeout(300)]


@pytest.mark.timeout(600)  # a local cluster and two replicas: slow on a loaded box
def test_cascade_serve_ray_answers_an_image_chat_on_two_replicas(tiny_vlm, child_dir):
    import numpy as np

    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cascade.cli",
            "serve",
            "--ray",
            "--replicas",
            "2",
            "--tiny",
            "--threads",
            "1",
            "--no-shipped",
            "--pipeline",
            f"plain={PIPELINES / 'images_plain.yaml'}",
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=child_dir,
        env=child_env(child_dir),
    )
    url, ours = f"http://127.0.0.1:{port}", []  # /health answers of our ingress, from launch
    try:
        deadline = time.monotonic() + 400
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                r = httpx.get(f"{url}/health", timeout=2)
                if r.headers.get("content-type") == "application/json" and "models" in r.json():
                    ours.append((r.status_code, r.json()))  # (not Serve's proxy's own answers)
                    if r.status_code == 200 and r.json()["replicas"].get("vlm_answer", 0) >= 2:
                        break
            except (httpx.TransportError, ValueError):
                pass
            assert time.monotonic() < deadline, "cascade serve --ray did not come up"
            time.sleep(0.2)
        # Readiness is never "ok" while the VLM deployment has no running replica.
        for status, body in ours:
            up = body["replicas"].get("vlm_answer", 0) >= 1
            assert (status == 200) == up, (status, body)
            assert up or "deployment 'vlm_answer': no running replica" in body["waiting_for"]
        assert httpx.get(f"{url}/health/live").json() == {"status": "alive"}
        health = ours[-1][1]
        assert health["replicas"] == {"ingress": 1, "vlm_answer": 2} and health["random_weights"]
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        image = np.random.default_rng(7).integers(0, 255, (48, 64, 3), dtype=np.uint8)
        messages = [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image_url",
                        "image_url": {"url": data_url(png_bytes(image), "image/png")},
                    },
                    {"type": "text", "text": "What is in the picture?"},
                ],
            }
        ]
        turns = [
            client.chat.completions.create(model="cascade/plain", messages=messages)
            for _ in range(2)
        ]
        assert all(isinstance(t.choices[0].message.content, str) for t in turns)
        vlm = [
            next(s for s in t.model_extra["cascade"]["trace"]["stages"] if s["name"] == "vlm")
            for t in turns
        ]
        assert [v["counters"]["kv_cache_hits"] for v in vlm] == [0, 1]  # turn 2: same replica
    finally:
        proc.send_signal(signal.SIGINT)  # ^C: serve.shutdown(), ray.shutdown()
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert proc.returncode == 0, out[-2000:]
    assert "random-weight" in out  # the tiny-model note


@pytest.mark.timeout(600)  # a local cluster, its replicas and a drain: slow on a loaded box
def test_cascade_serve_ray_drains_and_exits_0_on_sigterm(tiny_vlm, child_dir):
    """SIGTERM (what a process manager sends) while a request is in the pipeline: the request is
    answered, then Serve and Ray shut down, and the process exits 0 (it used to abort)."""
    import threading

    import numpy as np

    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cascade.cli",
            "serve",
            "--ray",
            "--tiny",
            "--threads",
            "1",
            "--no-shipped",
            "--pipeline",
            f"images_small={PIPELINES / 'images_small.yaml'}",
            "--port",
            str(port),
            "--drain-timeout",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=child_dir,
        env=child_env(child_dir, CASCADE_RAY_IMPORTS='["tests.serve.fault_stage"]'),
    )
    url, answers = f"http://127.0.0.1:{port}", []
    image = np.zeros((32, 32, 3), np.uint8)
    body = {
        "model": "cascade/images_small",
        "max_tokens": 2,
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image_url",
                        "image_url": {"url": data_url(png_bytes(image), "image/png")},
                    },
                    {"type": "text", "text": "SLEEP 4 what is it?"},
                ],
            }
        ],
    }
    try:
        deadline = time.monotonic() + 400
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                r = httpx.get(f"{url}/health", timeout=2)
                if r.status_code == 200 and "models" in r.json():
                    break
            except (httpx.TransportError, ValueError):
                pass
            assert time.monotonic() < deadline, "cascade serve --ray did not come up"
            time.sleep(0.2)
        ask = threading.Thread(
            target=lambda: answers.append(
                httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120)
            )
        )
        ask.start()
        while httpx.get(f"{url}/health", timeout=5).json()["busy"] < 1:
            assert time.monotonic() < deadline + 30, "the request never ran"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
        ask.join(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            out, _ = proc.communicate()
    assert proc.returncode == 0, out[-3000:]
    assert [a.status_code for a in answers] == [200], answers
    assert "SIGTERM: drained; stopping Ray Serve" in out, out[-2000:]
