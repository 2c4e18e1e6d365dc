"""Opt-in fetching of http(s) media URLs (`--allowed-media-domains`), against real HTTP servers on
this machine only: `allowed` on 127.0.0.1 (allowed explicitly: `--allow-media-networks
127.0.0.1/32`), `other` on 127.0.0.2 and `v6` on ::1 (loopback, refused). Names that resolve to
private addresses come from a resolver stub (`names`): nothing here resolves or contacts a host
off this machine. A refused URL is a 400 naming the part, and its target saw no request (the local
servers count theirs; a spy on `socket.create_connection` shows that no connection to the refused
address was opened).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import numpy as np
import pytest

from .conftest import IMAGES, chat, data_url, image_part, png_bytes, running_server, small_config

pytestmark = pytest.mark.slow
PNG = png_bytes(np.random.default_rng(3).integers(0, 255, (48, 64, 3), dtype=np.uint8))
BIG = png_bytes(np.random.default_rng(4).integers(0, 255, (200, 200, 3), dtype=np.uint8))
MAX_BYTES = 20_000
TIMEOUT = 1.5


class _Handler(BaseHTTPRequestHandler):
    seen: list[str]

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self.seen.append(self.path)
        path, _, query = self.path.partition("?")
        if path == "/img.png":
            self._send(PNG, "image/png")
        elif path == "/big.png":
            self._send(BIG, "image/png")
        elif path == "/big-undeclared.png":
            self._send(BIG, "image/png", declare=False)
        elif path == "/page.html":
            self._send(b"<html></html>", "text/html")
        elif path == "/slow.png":
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            for b in PNG[:40]:  # a byte every 0.25 s: never done within TIMEOUT
                self.wfile.write(bytes([b]))
                self.wfile.flush()
                time.sleep(0.25)
        elif path == "/redirect":
            self.send_response(302)
            self.send_header("Location", query.removeprefix("to="))
            self.end_headers()
        else:
            self.send_error(404)

    def _send(self, body: bytes, mime: str, declare: bool = True) -> None:
        self.send_response(200)
        self.send_header("Content-Type", mime)
        if declare:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(OSError):  # the fetcher hung up past its cap
            self.wfile.write(body)


@contextmanager
def media_server(host: str):
    """A real HTTP server on `host`; yields (base URL, the paths it was asked for)."""
    seen: list[str] = []
    handler = type("Handler", (_Handler,), {"seen": seen})
    server_cls = ThreadingHTTPServer
    if ":" in host:
        server_cls = type("V6", (ThreadingHTTPServer,), {"address_family": socket.AF_INET6})
    server = server_cls((host, 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    shown = f"[{host}]" if ":" in host else host
    try:
        yield f"http://{shown}:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _v6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def servers():
    with media_server("127.0.0.1") as allowed, media_server("127.0.0.2") as other:
        if _v6():
            with media_server("::1") as v6:
                yield {"allowed": allowed, "other": other, "v6": v6}
        else:
            yield {"allowed": allowed, "other": other, "v6": None}


# Names that resolve to private addresses; every other name goes to the system's resolver.
NAMES = {
    "intranet.test": "10.1.2.3",
    "metadata.test": "169.254.169.254",
    "router.test": "192.168.0.1",
    "loop.test": "127.0.0.2",
    "media.test": "127.0.0.1",
}


@pytest.fixture(scope="module")
def app_url(tiny_vlm, servers):
    from cascade.serve.app import create_app

    app = create_app(
        small_config(
            tiny_vlm,
            allowed_media_domains=["*"],
            allow_media_networks=["127.0.0.1/32"],
            max_media_bytes=MAX_BYTES,
            media_fetch_timeout=TIMEOUT,
        )
    )
    fetcher = app.state.engine.fetcher
    system = fetcher.resolve
    asked: list[str] = []

    def names(host, port, *args, **kw):
        asked.append(host)
        if host in NAMES:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (NAMES[host], port))]
        return system(host, port, *args, **kw)

    fetcher.resolve = names
    with running_server(app) as url:
        yield url, asked


@pytest.fixture
def connections(monkeypatch):
    """Every (host, port) a `socket.create_connection` was asked for during the test."""
    opened: list[tuple] = []
    real = socket.create_connection

    def spy(address, *args, **kw):
        opened.append(address)
        return real(address, *args, **kw)

    monkeypatch.setattr(socket, "create_connection", spy)
    return opened


def _ask(app_url, url: str, **part) -> httpx.Response:
    body = chat(IMAGES, "What is it?", {**image_part(url), **part}, max_tokens=2)
    return httpx.post(f"{app_url}/v1/chat/completions", json=body, timeout=120)


def _refused(r: httpx.Response, code: str) -> dict:
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "messages[0].content[0]" and err["code"] == code, err
    return err


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_every_private_address_form_is_refused_before_any_connection(app_url, servers, connections):
    url, _ = app_url
    other, other_seen = servers["other"]
    port = _port(other)
    forms = [
        other,  # 127.0.0.2: IPv4 loopback outside the allowed 127.0.0.1/32
        f"http://2130706434:{port}",  # 127.0.0.2 as a decimal number
        f"http://0177.0.0.2:{port}",  # ... in octal
        f"http://0x7f.0.0.2:{port}",  # ... in hex
        f"http://[::ffff:127.0.0.2]:{port}",  # ... inside IPv6
        f"http://loop.test:{port}",  # a name resolving to it
        "http://10.0.0.1",
        "http://172.16.5.4",
        "http://172.31.255.254",
        "http://192.168.1.1",
        "http://169.254.169.254/latest/meta-data",  # the cloud metadata address
        "http://[fe80::1]",
        "http://[fd00::1]",
        "http://0.0.0.0",
        "http://intranet.test",  # names resolving to 10/8, metadata, 192.168/16
        "http://metadata.test",
        "http://router.test",
    ]
    if servers["v6"]:
        forms.append(servers["v6"][0])  # [::1]: IPv6 loopback
    for form in forms:
        err = _refused(_ask(url, f"{form}/img.png"), "address_not_allowed")
        assert "--allow-media-networks" in err["message"], err
    assert other_seen == [] and (servers["v6"] is None or servers["v6"][1] == [])
    refused = {"127.0.0.2", "::ffff:127.0.0.2", "::1", "10.0.0.1", "172.16.5.4", "10.1.2.3"}
    refused |= {"172.31.255.254", "192.168.1.1", "169.254.169.254", "fe80::1", "fd00::1"}
    refused |= {"0.0.0.0", "192.168.0.1"}
    assert not [a for a in connections if a[0] in refused], connections


def test_a_redirect_to_a_private_address_is_refused_at_that_hop(app_url, servers, connections):
    url, _ = app_url
    allowed, seen = servers["allowed"]
    other, other_seen = servers["other"]
    seen.clear()
    hop2 = f"{allowed}/redirect?to={other}/img.png"  # allowed -> allowed -> 127.0.0.2
    for target in (f"{allowed}/redirect?to={hop2}", f"{allowed}/redirect?to=http://metadata.test/"):
        _refused(_ask(url, target), "address_not_allowed")
    assert [p.split("?")[0] for p in seen] == ["/redirect", "/redirect", "/redirect"]
    assert other_seen == []
    assert not [a for a in connections if a[0] in ("127.0.0.2", "169.254.169.254")]


def test_an_allowed_fetch_is_answered_and_shares_the_caches_of_an_upload(app_url, servers):
    url, asked = app_url
    allowed, seen = servers["allowed"]
    seen.clear()
    sent = _ask(url, data_url(PNG, "image/png"))  # the same bytes as a data URL first
    assert sent.status_code == 200, sent.text
    r = _ask(url, f"{allowed}/img.png", uuid="fetched-1")
    assert r.status_code == 200, r.text
    assert seen == ["/img.png"]
    vlm = next(s for s in r.json()["cascade"]["trace"]["stages"] if s["name"] == "vlm")
    assert vlm["counters"]["kv_cache_hits"] == 1  # the upload's prefix: same content, same key
    assert (
        r.json()["choices"][0]["message"]["content"]
        == sent.json()["choices"][0]["message"]["content"]
    )
    body = chat(
        IMAGES,
        "And now?",
        {"type": "image_url", "image_url": None, "uuid": "fetched-1"},
        max_tokens=2,
    )
    again = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120)
    assert again.status_code == 200, again.text
    assert seen == ["/img.png"]  # the uuid's media came from the store, not a second fetch
    # A name is resolved once and the connection goes to the address checked (no rebinding).
    asked.clear()
    assert _ask(url, f"{allowed.replace('127.0.0.1', 'media.test')}/img.png").status_code == 200
    assert asked == ["media.test"]


def test_an_oversize_a_slow_and_a_wrong_type_fetch_are_refused(app_url, servers):
    url, _ = app_url
    allowed, _ = servers["allowed"]
    for path in ("/big.png", "/big-undeclared.png"):
        r = _ask(url, allowed + path)
        assert r.status_code == 413, r.text
        assert r.json()["error"]["code"] == "media_too_large"
        assert "--max-media-bytes" in r.json()["error"]["message"]
    t0 = time.monotonic()
    err = _refused(_ask(url, f"{allowed}/slow.png"), "fetch_timeout")
    assert "--media-fetch-timeout" in err["message"] and time.monotonic() - t0 < TIMEOUT + 5
    err = _refused(_ask(url, f"{allowed}/page.html"), "invalid_media_type")
    assert "text/html" in err["message"]
    _refused(_ask(url, f"{allowed}/missing.png"), "fetch_failed")


def test_fetching_is_off_by_default_and_limited_to_the_allowed_hosts():
    from cascade.serve.config import ServeConfig
    from cascade.serve.errors import APIError
    from cascade.serve.fetch import MediaFetcher
    from cascade.serve.media import read_part

    with pytest.raises(APIError) as e:
        read_part("image", "http://127.0.0.1:1/x.png", ServeConfig(), "messages[0].content[0]")
    assert e.value.status == 400 and "--allowed-media-domains" in str(e.value)
    asked = []
    fetcher = MediaFetcher(("media.example.org", "*.cdn.example.org"), resolve=asked.append)
    for bad in ("http://example.org/x.png", "http://evil.org/media.example.org.png"):
        with pytest.raises(APIError, match="--allowed-media-domains") as e:
            fetcher.fetch(bad, "image", "p")
        assert e.value.code == "domain_not_allowed"
    for bad, code in (
        ("ftp://media.example.org/x.png", "url_not_allowed"),
        ("http://user:pw@media.example.org/x.png", "url_not_allowed"),
    ):
        with pytest.raises(APIError) as e:
            fetcher.fetch(bad, "image", "p")
        assert e.value.code == code
    assert asked == []  # refused before any name was resolved


def test_the_flags_parse_as_vllm_spells_them():
    from cascade.cli import build_parser
    from cascade.serve.config import from_args

    args = build_parser().parse_args(
        ["serve", "--allowed-media-domains", "a.org", "*.b.org,c.org", "--max-media-bytes", "9"]
    )
    cfg = from_args(args)
    assert cfg.allowed_media_domains == ["a.org", "*.b.org", "c.org"]
    assert cfg.max_media_bytes == 9 and cfg.allow_media_networks == []
    with pytest.raises(Exception, match="not a network"):
        from_args(build_parser().parse_args(["serve", "--allow-media-networks", "10.0.0.0/33"]))


def test_a_fetched_body_never_leaves_a_file(servers, tmp_path):
    """Bodies stream to anonymous temporary files: nothing stays in the upload folder."""
    from cascade.serve.fetch import MediaFetcher

    allowed, _ = servers["allowed"]
    f = MediaFetcher(("*",), ("127.0.0.1/32",), 5.0, MAX_BYTES, tmp_path)
    data, mime = f.fetch(f"{allowed}/img.png", "image", "p")
    assert data == PNG and mime == "image/png" and list(tmp_path.iterdir()) == []
