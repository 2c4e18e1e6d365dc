"""Server test fixtures: stand-in pipelines, generated media, and a real uvicorn on 127.0.0.1."""
from __future__ import annotations

import base64
import io
import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from . import serve_stages  # noqa: F401  (registers serve_test_vlm)

PIPELINES = Path(__file__).resolve().parent / "pipelines"


def fake_config(**kw):
    from cascade.serve.config import ServeConfig

    return ServeConfig(shipped=False, pipelines={"video_fake": str(PIPELINES / "video_fake.yaml"),
                                                 "images_fake": str(PIPELINES / "images_fake.yaml")},
                       **kw)


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
    from cascade.media_gen import make_sign_video, render_text_image

    d = tmp_path_factory.mktemp("serve-media")
    truth = make_sign_video(d / "sign.mp4", width=320, height=240, frames_per_scene=10,
                            sign_frames=range(22, 26), sign_font_size=24)
    (d / "text.png").write_bytes(png_bytes(render_text_image("HELLO 42")))
    (d / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\nthis is not a png")
    (d / "corrupt.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42 not really a video")
    return d, truth


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_server(app):
    """uvicorn serving `app` on 127.0.0.1:<free port> in a thread; yields the base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
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
