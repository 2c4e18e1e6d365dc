"""Faults end to end on a real uvicorn, each ending clearly and failing only its own request:
a decode that fails mid-stream, a client that stops reading its stream, an upload that trickles
in, a request over the total-pixel cap, and (in a real process on a real 1 MiB file system) an
upload disk that is full.

The server runs the real tiny VLM. `images_failing` is the real `vlm_answer` whose decode raises
after n tokens when asked (`test_vlm_fault`, fault_stage.py). The module's server sits behind a
thin link (4 KiB of send buffer, conftest.running_server) so that a client that stops reading
blocks the server's writes after a few kilobytes, as a slow network would.
"""

from __future__ import annotations

import io
import json
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

import httpx
import numpy as np
import pytest

from .conftest import (
    IMAGES,
    PIPELINES,
    SMALL,
    chat,
    child_env,
    data_url,
    free_port,
    image_part,
    png_bytes,
    running_server,
    video_part,
    warm,
)

FAILING = "cascade/images_failing"


def _image(seed: int) -> dict:
    pixels = np.random.default_rng(seed).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    return image_part(data_url(png_bytes(pixels), "image/png"))


def _metric(text: str, name: str, labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + labels + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _wait_until(cond, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def _raw_post(url: str, body: bytes, *, length: int | None = None, rcvbuf: int | None = None):
    """A socket that has sent a chat request's headers and `body` (all of it, unless `length`
    says more is coming)."""
    u = urlparse(url)
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect((u.hostname, u.port))
    s.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: test\r\nContent-Type: application/json"
        b"\r\nContent-Length: " + str(length or len(body)).encode() + b"\r\n\r\n" + body
    )
    return s


@pytest.fixture(scope="module")
def served(tiny_vlm):
    from cascade.serve.app import create_app
    from cascade.serve.config import ServeConfig

    config = ServeConfig(
        model=tiny_vlm,
        shipped=False,
        workers=4,
        max_concurrent=4,
        pipelines={**SMALL, "images_failing": str(PIPELINES / "images_failing.yaml")},
        send_timeout_s=1.0,
        upload_timeout_s=2.0,
        max_total_pixels=8000,
    )
    app = create_app(config)
    warm(app)
    with running_server(app, send_buffer=4096) as url:
        yield url, app.state.engine


def test_a_decode_failing_mid_stream_ends_with_an_error_event_and_done(served):
    url, engine = served
    picture = _image(1)
    failing = chat(FAILING, "FAIL_AFTER 3 then describe it", picture, stream=True, max_tokens=32)
    with ThreadPoolExecutor(1) as pool:  # another request, served meanwhile
        other = pool.submit(
            httpx.post,
            f"{url}/v1/chat/completions",
            timeout=300,
            json=chat(IMAGES, "What is it?", _image(2)),
        )
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=failing, timeout=300) as r:
            assert r.status_code == 200  # the first token was out: the status was sent
            events = [ln[len("data: ") :] for ln in r.iter_lines() if ln]
        assert other.result().status_code == 200
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert error["code"] == "pipeline_error" and "failed after 3 tokens" in error["message"]
    chunks = [json.loads(e) for e in events[:-2]]
    tokens = [c["choices"][0]["delta"]["content"] for c in chunks[1:]]
    assert 1 <= len(tokens) <= 3 and all(t for t in tokens)  # what was decoded before the fault
    assert not any(c["choices"][0]["finish_reason"] for c in chunks)
    # The pipeline, its model and its KV cache keep serving: the same picture answers again.
    again = httpx.post(
        f"{url}/v1/chat/completions",
        timeout=300,
        json=chat(FAILING, "then describe it", picture, max_tokens=8),
    )
    assert again.status_code == 200 and again.json()["choices"][0]["message"]["content"]
    metrics = httpx.get(f"{url}/metrics").text
    assert _metric(metrics, "cascade_requests_total", f'{{model="{FAILING}",status="500"}}') == 1
    assert engine.busy == 0


def test_a_client_that_stops_reading_is_dropped_and_its_decode_cancelled(served):
    url, engine = served
    before = httpx.get(f"{url}/metrics").text
    body = json.dumps(
        chat(IMAGES, "Describe it.", _image(3), stream=True, max_tokens=2000)
    ).encode()
    with _raw_post(url, body, rcvbuf=4096) as s:
        got = b""
        while b"data: " not in got:  # the stream has begun ...
            got += s.recv(256)
        assert got.startswith(b"HTTP/1.1 200")
        # ... and this client reads nothing more. Its 2,000-token decode fills the thin link,
        # a chunk waits past --send-timeout (1 s): the stream is dropped, the decode cancelled.
        _wait_until(lambda: engine.busy == 0, timeout=600)
        after = httpx.get(f"{url}/metrics").text
        ok = httpx.post(
            f"{url}/v1/chat/completions", timeout=300, json=chat(IMAGES, "What is it?", _image(4))
        )
        assert ok.status_code == 200  # served while the stalled client still holds its socket
    label = f'{{model="{IMAGES}",status="499"}}'
    assert (
        _metric(after, "cascade_requests_total", label)
        == _metric(before, "cascade_requests_total", label) + 1
    )
    # The run was cancelled, not finished: no answer and no completion tokens were recorded.
    for name, labels in (
        ("cascade_answers_total", f'{{model="{IMAGES}",produced_by="vlm"}}'),
        ("cascade_completion_tokens_total", f'{{model="{IMAGES}"}}'),
    ):
        assert _metric(after, name, labels) == _metric(before, name, labels), name


def test_a_slow_upload_times_out_alone(served):
    url, engine = served
    with _raw_post(url, b'{"model": "cascade/images_small", "mess', length=100_000) as s:
        # While this body trickles (it never finishes), other requests are served and this one
        # holds no slot: the body is read before a request is admitted.
        ok = httpx.post(
            f"{url}/v1/chat/completions", timeout=300, json=chat(IMAGES, "What is it?", _image(5))
        )
        assert ok.status_code == 200
        s.settimeout(60)
        reply = b""
        while chunk := s.recv(4096):
            reply += chunk
    head, _, payload = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), head
    error = json.loads(payload)["error"]
    assert error["code"] == "upload_timeout" and "--upload-timeout" in error["message"]
    assert engine.busy == 0


def test_the_total_pixels_of_a_request_are_capped(served):
    url, _ = served
    three = chat(IMAGES, "Compare them.", _image(6), _image(7), _image(8))  # 3 x 3,072 > 8,000
    r = httpx.post(f"{url}/v1/chat/completions", json=three, timeout=300)
    assert r.status_code == 413, r.text
    error = r.json()["error"]
    assert (error["code"], error["param"]) == ("too_many_pixels", "messages[0].content[2]")
    assert "9,216" in error["message"] and "8,000" in error["message"]
    assert "--max-total-pixels" in error["message"]
    two = chat(IMAGES, "Compare them.", _image(6), _image(7))  # 6,144: within the cap
    assert httpx.post(f"{url}/v1/chat/completions", json=two, timeout=300).status_code == 200


def _noise_video(frames: int = 20) -> bytes:
    """An MP4 of random frames: it does not compress (1.8 MB for 20 frames at 320x240)."""
    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        stream = out.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt, stream.bit_rate = (
            320,
            240,
            "yuv420p",
            20_000_000,
        )
        rng = np.random.default_rng(0)
        for _ in range(frames):
            frame = av.VideoFrame.from_ndarray(
                rng.integers(0, 255, (240, 320, 3), np.uint8), format="rgb24"
            )
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return buf.getvalue()


def _can_mount_a_tmpfs() -> str | None:
    """Why a private tmpfs cannot be mounted here (None when it can)."""
    if shutil.which("unshare") is None:
        return "no unshare(1)"
    try:
        probe = subprocess.run(
            ["unshare", "-Urm", "sh", "-c", "mount -t tmpfs tmpfs /mnt"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    return None if probe.returncode == 0 else probe.stderr.strip() or "unshare -Urm failed"


def test_a_full_upload_disk_is_507_and_leaves_nothing(tmp_path, tiny_vlm, media_dir, child_dir):
    """`cascade serve` in its own mount namespace (unshare: a user namespace, no root needed),
    its --upload-dir a real 1 MiB tmpfs: the kernel answers ENOSPC when an upload does not fit."""
    why = _can_mount_a_tmpfs()
    if why:
        pytest.skip(f"cannot mount a private tmpfs: {why}")
    d, _ = media_dir
    uploads, port = tmp_path / "uploads", free_port()
    uploads.mkdir()
    mount = 'mount -t tmpfs -o size=1m,mode=0700 tmpfs "$0" && exec "$@"'
    proc = subprocess.Popen(
        [
            "unshare",
            "-Urm",
            "sh",
            "-c",
            mount,
            str(uploads),
            sys.executable,
            "-m",
            "cascade.cli",
            "serve",
            "--model",
            tiny_vlm,
            "--no-shipped",
            "--port",
            str(port),
            "--upload-dir",
            str(uploads),
            "--pipeline",
            f"video={PIPELINES / 'video_fuzz.yaml'}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=child_dir,
        env=child_env(child_dir),
    )
    url, seen = (
        f"http://127.0.0.1:{port}",
        Path(f"/proc/{proc.pid}/root") / str(uploads).lstrip("/"),
    )
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, proc.stdout.read()[-3000:]
            assert time.monotonic() < deadline, "the server did not become ready"
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        big = _noise_video()
        assert len(big) > 1 << 20
        r = httpx.post(
            f"{url}/v1/chat/completions",
            timeout=300,
            json=chat("cascade/video", "What is it?", video_part(data_url(big, "video/mp4"))),
        )
        assert r.status_code == 507, r.text
        error = r.json()["error"]
        assert (error["code"], error["param"]) == ("insufficient_storage", "messages[0].content[0]")
        assert "no space left" in error["message"] and str(uploads) not in error["message"]
        assert list(seen.iterdir()) == []  # nothing half-written stays on the full disk
        small = (d / "sign.mp4").read_bytes()  # what fits is still served
        r = httpx.post(
            f"{url}/v1/chat/completions",
            timeout=300,
            json=chat("cascade/video", "What is it?", video_part(data_url(small, "video/mp4"))),
        )
        assert r.status_code == 200, r.text
        assert list(seen.iterdir()) == []
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
