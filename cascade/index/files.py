"""The one safe writer of the index: a file is written beside itself and renamed into place, so a
crash or a concurrent writer never leaves a half-written file that looks complete."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

__all__ = ["write_atomic", "write_json", "read_json"]


def write_atomic(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Write `path` with `write(file)`: into a temporary file in the same folder, then
    `os.replace` (atomic on POSIX and Windows); the folder is created when missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, lambda fh: fh.write(json.dumps(data).encode()))


def read_json(path: Path) -> Any:
    """The JSON in `path`, or None when it is missing or damaged (an index is rebuilt, never
    trusted half-read)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
