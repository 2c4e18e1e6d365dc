"""Sentence vectors of the tools' text per frame (`text_embed`), saved in a video's index, so a
question about an indexed video embeds only its own question, not every frame's text again.

One pair of files per embedding model: `texts-<key>.npy` (float32 unit vectors) and
`texts-<key>.json` (the text of each row), written last: a JSON file whose count does not match
the vectors counts as nothing saved. Keyed by text, as `text_embed`'s in-memory cache is.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..cache import LRUCache, content_hash
from .files import read_json, write_atomic, write_json

__all__ = ["SavedTexts"]

FORMAT = 1

# Files this process already read into a cache, by (path, modification time, cache) -> the texts
# they hold; an LRUCache, so `clear_all_caches` makes the next question read them again.
_SEEDED = LRUCache(1024, size_of=lambda v: 1)


class SavedTexts:
    """The saved sentence vectors of one embedding model for one video."""

    def __init__(self, folder: Path, model: str):
        stem = f"texts-{content_hash(model, key='text_embed')[:16]}"
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
        texts = meta.get("texts", [])
        return dict(zip(texts, vectors, strict=True)) if len(texts) == len(vectors) else {}

    def seed(self, cache: LRUCache) -> int:
        """Put the saved vectors into `cache` (once per version of the files); how many."""
        version = self._version(cache)
        if version is None or version in _SEEDED:
            return 0
        saved = self._read()
        for text, vector in saved.items():
            if text not in cache:
                cache.put(text, vector)
        _SEEDED.put(version, frozenset(saved))
        return len(saved)

    def add(self, found: dict[str, np.ndarray], cache: LRUCache) -> None:
        """Save `found` ({text: unit vector}) with what is saved already, unless it is all there;
        vectors first, then the JSON that makes them count (each file atomically)."""
        version = self._version(cache)
        known = _SEEDED.get(version) if version is not None else None
        if not found or (known is not None and known.issuperset(found)):
            return
        merged = {**self._read(), **found}
        texts = sorted(merged)
        vectors = np.stack([merged[t] for t in texts]).astype(np.float32)
        write_atomic(self.vectors_path, lambda fh: np.save(fh, vectors))
        write_json(self.meta_path, {"format": FORMAT, "texts": texts})
        _SEEDED.put(self._version(cache), frozenset(merged))
