"""Hubs a test can point `HF_ENDPOINT` at, all on 127.0.0.1 (no network): one that refuses
connections, one that accepts them and never answers, and a mirror serving model folders the way
the Hugging Face hub does (the file and tree endpoints `huggingface_hub` downloads through)."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def refusing_endpoint() -> str:
    """A local address nothing listens on: connections are refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@contextmanager
def black_hole() -> Iterator[str]:
    """A listening socket that never accepts or answers: requests hang until the client gives up."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    try:
        yield f"http://127.0.0.1:{s.getsockname()[1]}"
    finally:
        s.close()


class _MirrorHandler(BaseHTTPRequestHandler):
    root: Path  # <root>/<org>/<name>/<files>

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def _file(self) -> Path | None:
        parts = unquote(urlparse(self.path).path).strip("/").split("/")
        if len(parts) < 5 or parts[2] != "resolve":
            return None
        path = self.root.joinpath(parts[0], parts[1], *parts[4:])
        return path if path.is_file() else None

    def _send_file(self, body: bool) -> None:
        path = self._file()
        if path is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = path.read_bytes()
        self.send_response(200)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _send_tree(self, repo: Path, folder: str, recursive: bool) -> None:
        """The repo tree listing (`HfApi.list_repo_tree`): files (and folders) under `folder`."""
        base = repo / folder
        if not base.is_dir():
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        entries = []
        for p in sorted(base.rglob("*") if recursive else base.iterdir()):
            rel = p.relative_to(repo).as_posix()
            if p.is_file():
                entries.append(
                    {
                        "type": "file",
                        "path": rel,
                        "size": p.stat().st_size,
                        "oid": hashlib.sha1(p.read_bytes()).hexdigest(),
                    }
                )
            else:
                entries.append({"type": "directory", "path": rel, "oid": "0" * 40})
        data = json.dumps(entries).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_HEAD(self) -> None:
        self._send_file(body=False)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        parts = unquote(url.path).strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "tree":
            self._send_tree(
                self.root / parts[2] / parts[3],
                "/".join(parts[6:]),
                "recursive=true" in url.query.lower(),
            )
            return
        self._send_file(body=True)


@contextmanager
def failing_hub(status: int = 503) -> Iterator[str]:
    """A hub that answers every request with `status` (an outage, or rate limiting with 429)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_HEAD(self) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_HEAD

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def mirror(root: Path) -> Iterator[str]:
    """Serve `root/<org>/<name>/...` as hub repos `<org>/<name>` at revision main."""
    handler = type("Handler", (_MirrorHandler,), {"root": Path(root)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
