"""Per-frame tool results (OCR lines, detections) saved in a video's index, so a new process reads
them instead of running the models over every frame again.

One JSON file per stage configuration in the video's index folder (`VideoIndex.folder_for`):
`{frame content hash: [[text or class id, confidence, [x0, y0, x1, y1], extras...], ...]}`,
boxes in the frame's own pixels (extras: an OCR line's angle), exactly what the stage keeps in
its in-memory result cache. Plain JSON: a saved index is data, never code.
"""

from __future__ import annotations

from pathlib import Path

from ..artifacts import Box
from ..cache import LRUCache, content_hash
from .files import read_json, write_json

__all__ = ["SavedResults", "Found"]

FORMAT = 1
Found = list[tuple]  # (text or class id, confidence, box, extras...) per finding

# Files this process already read into (or wrote from) a cache, by (path, modification time,
# cache) -> the keys they hold: a question about an indexed video reads and writes nothing.
_SEEDED = LRUCache(4096, size_of=lambda v: 1)


class SavedResults:
    """The saved results of one stage configuration for one video."""

    def __init__(self, folder: Path, stage: str, config: str):
        self.path = folder / f"{stage}-{content_hash(config, key=stage)[:16]}.json"

    def _read(self) -> dict[str, Found]:
        data = read_json(self.path)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return {}
        return {
            k: [(a, float(c), Box(*b), *rest) for a, c, b, *rest in v]
            for k, v in data["results"].items()
        }

    def _version(self, cache: LRUCache) -> tuple | None:
        try:  # the cache's id: each stage configuration has its own cache to fill
            return str(self.path), self.path.stat().st_mtime_ns, id(cache)
        except OSError:
            return None

    def seed(self, cache: LRUCache) -> int:
        """Put the saved results into `cache` (once per version of the file); how many."""
        version = self._version(cache)
        if version is None or version in _SEEDED:
            return 0
        saved = self._read()
        for key, found in saved.items():
            if key not in cache:
                cache.put(key, found)
        _SEEDED.put(version, frozenset(saved))
        return len(saved)

    def add(self, results: dict[str, Found], cache: LRUCache) -> None:
        """Save `results` (this run's, all in `cache`) unless the file has them all already;
        atomically (a crash never leaves half a file)."""
        version = self._version(cache)
        known = _SEEDED.get(version) if version is not None else None
        if not results or (known is not None and known.issuperset(results)):
            return
        merged = {**self._read(), **results}
        body = {
            "format": FORMAT,
            "results": {
                k: [[a, c, [b.x0, b.y0, b.x1, b.y1], *rest] for a, c, b, *rest in v]
                for k, v in merged.items()
            },
        }
        write_json(self.path, body)
        _SEEDED.put(self._version(cache), frozenset(merged))
