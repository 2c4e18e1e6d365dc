"""Temporary files for uploaded media: named by content hash, deleted when no request holds them.

A video sent as a `data:` URL must be a file for PyAV, so it is written under the upload folder as
`<sha256>.<ext>` (through a temporary name, renamed once whole: a write that fails, e.g. on a full
disk, leaves nothing behind). Each request holds the files it uses (`hold`, a context manager);
the last request to let go of a file deletes it. A rejected upload (undecodable, too long, a bad
request around it) is therefore gone as soon as its request ends, and nothing piles up. Two requests
that
send the same bytes at once share one file. Reuse across turns does not need the file: the caches
(CLIP embeddings, OCR, detections, the VLM's KV prefix) are keyed by pixel content.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["Uploads"]


class Uploads:
    """Reference-counted temporary files under one folder (thread-safe).

    folder None: a fresh private folder (mode 0700) in the system temp dir, removed by `close`.
    A folder given by the user is kept; only the files written here are removed.
    """

    def __init__(self, folder: Path | None = None):
        self._own = folder is None
        self.folder = (
            Path(tempfile.mkdtemp(prefix="cascade-uploads-")) if folder is None else Path(folder)
        )
        self._refs: Counter[str] = Counter()
        self._lock = threading.Lock()

    @contextmanager
    def hold(self, name: str, data: bytes) -> Iterator[Path]:
        """The file `name` holding `data`, written if no request holds it yet; deleted on exit
        when this was the last holder. `name` is a content hash plus a suffix."""
        if Path(name).name != name or name.startswith("."):
            raise ValueError(f"upload names are plain file names, got {name!r}")
        path = self.folder / name
        with self._lock:
            if not self._refs[name]:
                self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
                fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".upload-")
                try:
                    with os.fdopen(fd, "wb") as f:
                        f.write(data)
                    os.replace(tmp, path)
                except BaseException:
                    os.unlink(tmp)
                    raise
            self._refs[name] += 1
        try:
            yield path
        finally:
            with self._lock:
                self._refs[name] -= 1
                if not self._refs[name]:
                    del self._refs[name]
                    path.unlink(missing_ok=True)

    def held(self) -> dict[str, int]:
        """{file name: requests holding it} (for tests and /health)."""
        with self._lock:
            return dict(self._refs)

    def close(self) -> None:
        if self._own:
            shutil.rmtree(self.folder, ignore_errors=True)
