"""Server test fixtures: small test pipelines on the real tiny VLM, generated media, and a real
uvicorn on 127.0.0.1.

The test pipelines (`pipelines/*_small.yaml`) run the real `vlm_answer` stage; the model is the
random-weight tiny Qwen2-VL (`build_tiny_vlm(size="test")`), built once per session and handed to
the server the way a user would: `ServeConfig(model=<its folder>)`, i.e. `cascade serve --model`.
A `test_fault` stage in front of the VLM injects delays and crashes on request (fault_stage.py).
"""

from __future__ import annotations

import base64
import io
import os
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from . import fault_stage  # noqa: F401  (registers test_fault)

PIPELINES = Path(__file__).resolve().parent / "pipelines"
REPO = Path(__file__).resolve().parents[2]
SMALL = {
    "video_small": str(PIPELINES / "video_small.yaml"),
    "images_small": str(PIPELINES / "images_small.yaml"),
}
VIDEO, IMAGES = "cascade/video_small", "cascade/images_small"
VLM_MAX_PIXELS = 28 * 28 * 64  # the `max_pixels` of the VLM stage in the small pipelines


@pytest.fixture(scope="session")
def tiny_vlm() -> str:
    """The random-weight tiny Qwen2-VL's folder (built once; cached under ~/.cache/vlm-cascade)."""
    from cascade.vlm import build_tiny_vlm

    return str(build_tiny_vlm(size="test"))


def small_config(model: str, **kw):
    """Serve only the small test pipelines, with `model` on their `vlm_answer` stage."""
    from cascade.serve.config import ServeConfig

    return ServeConfig(model=model, shipped=False, pipelines=dict(SMALL), **kw)


def data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def png_bytes(arr) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def chat(model: str, question: str, *parts: dict, **extra) -> dict:
    content = [*parts, {"type": "text", "text": question}]
    return {"model": model, "messages": [{"role": "user", "content": content}], **extra}


def image_part(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def video_part(url: str) -> dict:
    return {"type": "video_url", "video_url": {"url": url}}


@pytest.fixture(scope="session")
def media_dir(tmp_path_factory):
    from cascade.eval.render import render_text_image
    from cascade.eval.video import make_sign_video

    d = tmp_path_factory.mktemp("serve-media")
    truth = make_sign_video(
        d / "sign.mp4",
        width=320,
        height=240,
        frames_per_scene=10,
        sign_frames=range(22, 26),
        sign_font_size=24,
    )
    (d / "text.png").write_bytes(png_bytes(render_text_image("HELLO 42")))
    (d / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\nthis is not a png")
    (d / "corrupt.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42 not really a video")
    return d, truth


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _thin_link(size: int):
    """uvicorn's HTTP protocol on a thin link: `size` bytes of socket send buffer and of
    transport buffer, so a client that stops reading blocks the server's writes within a few
    kilobytes instead of the megabytes of a loopback socket."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class ThinLink(H11Protocol):
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)
            transport.set_write_buffer_limits(high=size)

    return ThinLink


@contextmanager
def running_server(app, *, send_buffer: int | None = None):
    """uvicorn serving `app` on 127.0.0.1:<free port> in a thread; yields the base URL.
    send_buffer: serve over a thin link (`_thin_link`)."""
    import uvicorn

    port = free_port()
    link = {"http": _thin_link(send_buffer)} if send_buffer else {}
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **link)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def warm(app) -> None:
    """Load every served pipeline's models now (`QA.setup`), so no request pays the model load."""
    for served in app.state.engine.models.values():
        served.qa.setup()


def stream_spread(client, model: str, messages: list, max_tokens: int):
    """Stream a completion: (the content pieces, their arrival times, `decode_seconds`)."""
    arrivals, texts, last = [], [], None
    for chunk in client.chat.completions.create(
        model=model, messages=messages, max_tokens=max_tokens, stream=True
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            arrivals.append(time.perf_counter())
            texts.append(chunk.choices[0].delta.content)
        last = chunk
    return texts, arrivals, decode_seconds(last)


def decode_seconds(completion) -> float:
    """First token to last, on the server: the `vlm` stage's time less its time to first token."""
    vlm = next(
        s for s in completion.model_extra["cascade"]["trace"]["stages"] if s["name"] == "vlm"
    )
    return vlm["seconds"] - vlm["counters"]["ttft_s"]


@pytest.fixture(scope="session")
def child_dir(tmp_path_factory) -> Path:
    """Where a child process (`python -m cascade.cli ...`, a Ray worker) starts and what goes
    first on its PYTHONPATH: a folder holding only links to this tree's `cascade` and `tests`
    packages. Never the repository root itself: there its top-level `kernels/` folder shadows
    the Hugging Face `kernels` package that transformers imports."""
    d = tmp_path_factory.mktemp("child")
    for name in ("cascade", "tests"):
        (d / name).symlink_to(REPO / name, target_is_directory=True)
    return d


def child_env(child_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a child process started in `child_dir`: this one's, with `child_dir`
    first on PYTHONPATH (so the child imports this tree's code)."""
    import os

    path = os.pathsep.join(p for p in (str(child_dir), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


@contextmanager
def cascade_serve(*flags: str, cwd: Path, ready_within: float = 600):
    """A real `cascade serve --tiny <flags>` process on a free port, started in `cwd` (the
    `child_dir` fixture), once /health says ready; yields the base URL. Its output is shown if
    it dies or never gets ready."""

    import httpx

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cascade.cli", "serve", "--tiny", "--port", str(port), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
        env=child_env(cwd),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_within
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"cascade serve exited: {proc.stdout.read()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("cascade serve did not become ready")
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        yield url
    finally:
        end(proc, within=30)


@pytest.fixture(scope="module")
def cluster(child_dir):
    """A local Ray cluster and Serve for one test module (4 CPUs as scheduling units on any box:
    every replica runs 1 torch thread); yields Serve's HTTP address.

    The head runs in its own `ray start --block` process and this one only connects: `ray.init`
    would fork its GCS and raylet from pytest's process, whose many threads (torch, ONNX Runtime,
    servers of earlier tests) can leave a lock held in the forked child before it execs; CI saw
    that child hang for 300 s."""
    import ray
    from ray import serve

    gcs_port = free_port()
    log = child_dir / f"ray_head_{gcs_port}.log"
    with log.open("w") as out:  # the child keeps its own copy of the file
        head = subprocess.Popen(
            [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block"]
            + ["--port", str(gcs_port), "--num-cpus", "4", "--include-dashboard", "false"]
            + ["--disable-usage-stats"],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=child_dir,
            # `ray start` would turn on token authentication, which `ray.init` (as this process
            # imported it) does not speak; a local cluster that `ray.init` starts has none either.
            env=child_env(child_dir, RAY_AUTH_MODE="disabled"),
        )
    # Ray puts the driver's working directory on its workers' path: connect from `child_dir`,
    # not the repository root (whose kernels/ would shadow the package transformers imports).
    here = os.getcwd()
    os.chdir(child_dir)
    try:
        _connect(ray, f"127.0.0.1:{gcs_port}", head, log, child_dir)
    except BaseException:
        end(head, within=60)
        raise
    finally:
        os.chdir(here)
    port = free_port()
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()
        ray.shutdown()
        end(head, within=60)


def _connect(ray, address: str, head, log: Path, child_dir: Path, within: float = 120) -> None:
    """`ray.init` against the head at `address` once it answers; the head's output (`log`) is
    shown if it dies or never answers."""
    deadline = time.monotonic() + within
    while True:
        if head.poll() is not None:
            raise RuntimeError(f"ray start exited: {log.read_text()[-3000:]}")
        try:
            ray.init(
                address=address,
                log_to_driver=False,
                runtime_env={"env_vars": {"PYTHONPATH": child_env(child_dir)["PYTHONPATH"]}},
            )  # replicas import tests.* (and this tree's cascade)
            return
        except ConnectionError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"ray start never answered: {log.read_text()[-3000:]}") from None
            time.sleep(1)


def end(proc: subprocess.Popen, within: float) -> None:
    """SIGTERM, then SIGKILL if `proc` has not ended `within` seconds (`ray start --block` stops
    its GCS, raylet and workers on SIGTERM)."""
    proc.terminate()
    try:
        proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
