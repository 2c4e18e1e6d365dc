"""The demo's Gradio API reads only files this client uploaded: a `FileData.path` naming any other
server file is refused unread (raw HTTP, as an attacker would send it), while uploads through
`gradio_client` work.
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from .conftest import IMAGES, png_bytes, running_server, small_config, warm

gradio = pytest.importorskip("gradio")


@pytest.fixture(scope="module")
def demo_url(tiny_vlm, tmp_path_factory):
    from cascade.serve.app import create_app

    mp = pytest.MonkeyPatch()
    mp.setenv("VLM_CASCADE_CACHE", str(tmp_path_factory.mktemp("cache")))  # examples made fresh
    app = create_app(small_config(tiny_vlm), demo=True)
    warm(app)
    with running_server(app) as url:
        yield url
    mp.undo()


def _call(url: str, data: list) -> str:
    """POST /demo/gradio_api/call/ask and return the event stream's text."""
    r = httpx.post(f"{url}/demo/gradio_api/call/ask", json={"data": data}, timeout=30)
    assert r.status_code == 200, r.text
    event = r.json()["event_id"]
    return httpx.get(f"{url}/demo/gradio_api/call/ask/{event}", timeout=120).text


def _copies_in_gradio_cache(data: bytes, since: float) -> list[Path]:
    from gradio.utils import get_upload_folder

    digest = hashlib.sha256(data).hexdigest()
    return [p for p in Path(get_upload_folder()).rglob("*")
            if p.is_file() and p.stat().st_mtime >= since
            and hashlib.sha256(p.read_bytes()).hexdigest() == digest]


@pytest.mark.slow
def test_a_server_path_in_filedata_is_refused_unread(demo_url, tmp_path):
    secret = tmp_path / "private.png"  # a file on the server that no client uploaded
    data = png_bytes(np.full((48, 64, 3), (200, 30, 90), np.uint8))
    secret.write_bytes(data)
    t0 = time.time() - 1
    # A loopback URL too: Gradio itself refuses to fetch private addresses.
    for path in (str(secret), secret.as_uri(), "http://127.0.0.1:1/x.png"):
        stream = _call(demo_url, [[{"path": path, "meta": {"_type": "gradio.FileData"}}],
                                  "What is in it?", IMAGES, None])
        assert "event: error" in stream and "event: complete" not in stream, stream[:500]
        assert "not uploaded" in stream or "failed validation" in stream, stream[:500]
    assert _copies_in_gradio_cache(data, t0) == []  # not even copied into Gradio's cache


@pytest.mark.slow
def test_an_uploaded_file_is_answered(demo_url, tmp_path):
    from gradio_client import Client, handle_file

    mine = tmp_path / "mine.png"
    mine.write_bytes(png_bytes(np.full((48, 64, 3), 120, np.uint8)))
    client = Client(demo_url + "/demo/", verbose=False)
    out = client.predict([handle_file(str(mine))], "What is in it?", IMAGES, None, api_name="/ask")
    answer, route = out[0], out[1]
    assert answer.startswith("### ") and "Answered by" in route
