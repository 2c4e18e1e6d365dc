"""Vectors saved in a video's index by key, as a stage's in-memory cache holds them: the sentence
vectors of the frames' text (`text_embed`, keyed by text) and the frames' CLIP vectors
(`clip_embed`, keyed by frame content hash). A question about an indexed video embeds only its own
question; an index built in chunks (`cascade.indexing`) keeps each chunk's vectors as it goes.

One pair of files per kind and model: `<kind>-<key>.npy` (float32 unit vectors) and
`<kind>-<key>.json` (the key of each row), written last: a JSON file whose count does not match
the vectors counts as nothing saved.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..cache import LRUCache, content_hash
from .files import read_json, write_atomic, write_json

__all__ = ["KeyedVectors"]

FORMAT = 1

# Files this process already read into a cache, by (path, modification time, cache) -> the keys
# they hold; an LRUCache, so `clear_all_caches` makes the next question read them again.
_SEEDED = LRUCache(1024, size_of=lambda v: 1)


class KeyedVectors:
    """The saved vectors of one kind ("texts", "clip") and model for one video."""

    def __init__(self, folder: Path, kind: str, model: str):
        stem = f"{kind}-{content_hash(model, key=kind)[:16]}"
        self.vectors_path = folder / f"{stem}.npy"
        self.meta_path = folder / f"{stem}.json"

    def _version(self, cache: LRUCache) -> tuple | None:
        try:
            return str(self.meta_path), self.meta_path.stat().st_mtime_ns, id(cache)
        except OSError:
            return None

    def _read(self) -> dict[str, np.ndarray]:
        meta = read_json(self.meta_path)
        try:
            vectors = np.load(self.vectors_path)
        except (OSError, ValueError):
            return {}
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            return {}
        keys = meta.get("keys", [])
        return dict(zip(keys, vectors, strict=True)) if len(keys) == len(vectors) else {}

    def seed(self, cache: LRUCache) -> int:
        """Put the saved vectors into `cache` (once per version of the files); how many."""
        version = self._version(cache)
        if version is None or version in _SEEDED:
            return 0
        saved = self._read()
        for key, vector in saved.items():
            if key not in cache:
                cache.put(key, vector)
        _SEEDED.put(version, frozenset(saved))
        return len(saved)

    def add(self, found: dict[str, np.ndarray], cache: LRUCache) -> None:
        """Save `found` ({key: unit vector}) with what is saved already, unless it is all there;
        vectors first, then the JSON that makes them count (each file atomically)."""
        version = self._version(cache)
        known = _SEEDED.get(version) if version is not None else None
        if not found or (known is not None and known.issuperset(found)):
            return
        merged = {**self._read(), **found}
        keys = sorted(merged)
        vectors = np.stack([merged[k] for k in keys]).astype(np.float32)
        write_atomic(self.vectors_path, lambda fh: np.save(fh, vectors))
        write_json(self.meta_path, {"format": FORMAT, "keys": keys})
        _SEEDED.put(self._version(cache), frozenset(merged))
