"""The demo reads only what its client uploaded (and its own examples), tried as an attacker would:
a Gradio `FileData` naming a server path, sent to the demo's API over raw HTTP.

The demo runs the shipped `doc_qa` with the real OCR (`--tiny`), started from a launch folder that
holds an image with text on it. Paths tried: that image (absolute, relative to the launch
folder, reached with `..`), a symlink to it inside Gradio's own upload folder, a file in the
examples' folder that is not an example, a file in the home folder (the `cascade serve --demo`
process, whose HOME is a temporary folder). None is read: the stream is an error, the image's
text appears nowhere, nothing is copied, no server path is echoed; Gradio's file route refuses
them too. The same image uploaded by the client is read, and its text comes back: the refusals
are what keeps it out.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from .conftest import free_port, png_bytes, running_server

gradio = pytest.importorskip("gradio")
pytestmark = pytest.mark.slow
SECRET = "ZEBRA 7731"  # the text on the server's image; the OCR reads it when the image is read


def _call(url: str, data: list) -> str:
    """POST /demo/gradio_api/call/ask and return the event stream's text."""
    r = httpx.post(f"{url}/demo/gradio_api/call/ask", json={"data": data}, timeout=30)
    assert r.status_code == 200, r.text
    event = r.json()["event_id"]
    return httpx.get(f"{url}/demo/gradio_api/call/ask/{event}", timeout=300).text


def _file(path: str) -> list:
    return [{"path": path, "meta": {"_type": "gradio.FileData"}}]


def _copies_in_gradio_cache(data: bytes, since: float) -> list[Path]:
    from gradio.utils import get_upload_folder

    digest = hashlib.sha256(data).hexdigest()
    return [
        p
        for p in Path(get_upload_folder()).rglob("*")
        if p.is_file()
        and not p.is_symlink()
        and p.stat().st_mtime >= since
        and hashlib.sha256(p.read_bytes()).hexdigest() == digest
    ]


def _secret_image() -> bytes:
    from cascade.eval.render import render_text_image

    return png_bytes(render_text_image(SECRET, font_size=40))


def _assert_refused(url: str, paths: list[str], server_paths: list[str]) -> None:
    for path in paths:
        stream = _call(url, [_file(path), "What does the text say?", "cascade/doc_qa", None])
        assert "event: error" in stream and "event: complete" not in stream, (path, stream[:400])
        assert "ZEBRA" not in stream and "7731" not in stream, (path, stream[:400])
        assert not any(p in stream for p in server_paths), (path, stream[:400])
        file_route = httpx.get(f"{url}/demo/gradio_api/file={path}", timeout=30)
        assert file_route.status_code in (403, 404) and "ZEBRA" not in file_route.text, path


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """The demo, in this process, started from a launch folder holding the secret image."""
    from cascade.serve.app import create_app
    from cascade.serve.config import ServeConfig

    launch, cache = tmp_path_factory.mktemp("launch"), tmp_path_factory.mktemp("cache")
    (launch / "secret.png").write_bytes(_secret_image())
    (launch / "sub").mkdir()
    mp = pytest.MonkeyPatch()
    mp.chdir(launch)
    mp.setenv("VLM_CASCADE_CACHE", str(cache))  # the examples are made here, fresh
    app = create_app(
        ServeConfig(tiny=True, shipped=False, pipelines={"doc_qa": "doc_qa"}, workers=1), demo=True
    )
    (cache / "demo-examples" / "notes.png").write_bytes(_secret_image())  # not an example
    for served in app.state.engine.models.values():
        served.qa.setup()
    with running_server(app) as url:
        yield url, launch, cache
    mp.undo()


def test_server_paths_in_filedata_are_refused_unread(launched):
    from gradio.utils import get_upload_folder

    url, launch, cache = launched
    t0 = time.time() - 1
    link = Path(get_upload_folder()) / "planted-link" / "secret.png"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.unlink(missing_ok=True)
    link.symlink_to(launch / "secret.png")  # as if another local process had planted it
    try:
        _assert_refused(
            url,
            [
                str(launch / "secret.png"),
                "secret.png",
                "./sub/../secret.png",
                f"{get_upload_folder()}/../../{launch.relative_to('/')}/secret.png".replace(
                    "//", "/"
                ),
                str(link),
                str(cache / "demo-examples" / "notes.png"),
                "/etc/hostname",
                (launch / "secret.png").as_uri(),
                "http://127.0.0.1:1/x.png",
            ],
            [str(launch), str(cache)],
        )
    finally:
        link.unlink()
        link.parent.rmdir()
    assert _copies_in_gradio_cache(_secret_image(), t0) == []  # not even copied into the cache


def test_the_same_image_uploaded_is_read(launched, tmp_path):
    """The control: uploaded by the client, the image is read and its text comes back."""
    from gradio_client import Client, handle_file

    url, _, _ = launched
    mine = tmp_path / "mine.png"
    mine.write_bytes(_secret_image())
    client = Client(url + "/demo/", verbose=False)
    out = client.predict(
        [handle_file(str(mine))], "What does the text say?", "cascade/doc_qa", None, api_name="/ask"
    )
    answer, tools = out[0], out[7]
    assert answer.startswith("### ") and "ZEBRA" in answer + tools


def test_an_uploaded_pdf_is_read_page_by_page(launched, tmp_path):
    """A two-page PDF uploaded to the demo: its pages are read, the total comes from page 2."""
    from gradio_client import Client, handle_file

    from ..media.pdfs import INVOICE_TOTAL, invoice_pages, pdf_bytes

    url, _, _ = launched
    doc = tmp_path / "invoice.pdf"
    doc.write_bytes(pdf_bytes(invoice_pages()))
    client = Client(url + "/demo/", verbose=False)
    out = client.predict(
        [handle_file(str(doc))], "What is the total?", "cascade/doc_qa", None, api_name="/ask"
    )
    answer, tools = out[0], out[7]
    assert (
        answer == f"### {INVOICE_TOTAL}"
        and f"“{INVOICE_TOTAL}” (1.00, invoice.pdf page 2)" in tools
    )


def test_cascade_serve_demo_reads_nothing_from_its_launch_or_home_folder(tmp_path):
    """The same attacks on `cascade serve --demo` as a user starts it: from a folder holding the
    image, with a home folder holding another."""
    launch, home = tmp_path / "launch", tmp_path / "home"
    launch.mkdir()
    home.mkdir()
    (launch / "secret.png").write_bytes(_secret_image())
    (home / "photo.png").write_bytes(_secret_image())
    cache = os.environ.get("VLM_CASCADE_CACHE") or str(Path.home() / ".cache" / "vlm-cascade")
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cascade.cli",
            "serve",
            "--demo",
            "--tiny",
            "--no-shipped",
            "--pipeline",
            "doc_qa=doc_qa",
            "--port",
            str(port),
        ],
        cwd=launch,
        env={**os.environ, "HOME": str(home), "VLM_CASCADE_CACHE": cache},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, proc.stdout.read()[-3000:]
            assert time.monotonic() < deadline, "cascade serve --demo did not become ready"
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        _assert_refused(
            url,
            [
                str(launch / "secret.png"),
                "secret.png",
                str(home / "photo.png"),
                "../home/photo.png",
            ],
            [str(launch), str(home)],
        )
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
