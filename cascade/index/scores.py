"""Question-independent measures of a video's frames that a question computes lazily and the
index keeps: how much each text read stands on a plate of its own (`evidence.signness`), so the
first reading question measures every frame's texts and the later ones read the numbers.

One JSON file per measure: `<name>.json`, `{key: value}` (the measure's own key: the frame's
content hash and the text's box). Plain JSON, written atomically.
"""

from __future__ import annotations

from pathlib import Path

from ..cache import LRUCache
from .files import read_json, write_json

__all__ = ["SavedScores"]

FORMAT = 1

# Files this process already read, by (path, modification time) -> their scores; an LRUCache, so
# `clear_all_caches` makes the next question read them from disk again.
_READ = LRUCache(64, size_of=lambda v: 1)


class SavedScores:
    """The saved values of one measure for one video."""

    def __init__(self, folder: Path, name: str):
        self.path = folder / f"{name}.json"

    def _version(self) -> tuple | None:
        try:
            return str(self.path), self.path.stat().st_mtime_ns
        except OSError:
            return None

    def load(self) -> dict[str, float]:
        """The saved values (a copy: fill it, then `add` what is new)."""
        version = self._version()
        if version is None:
            return {}
        known = _READ.get(version)
        if known is None:
            data = read_json(self.path)
            ok = isinstance(data, dict) and data.get("format") == FORMAT
            known = {k: float(v) for k, v in data["values"].items()} if ok else {}
            _READ.put(version, known)
        return dict(known)

    def add(self, values: dict[str, float]) -> None:
        """Save `values` merged into what is saved, unless nothing is new."""
        saved = self.load()
        if all(k in saved for k in values):
            return
        merged = {**saved, **values}
        write_json(self.path, {"format": FORMAT, "values": merged})
        version = self._version()
        if version is not None:
            _READ.put(version, merged)
