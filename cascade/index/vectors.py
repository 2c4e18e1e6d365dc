"""A video's CLIP vectors and their FAISS index, saved in its index folder: a later process loads
the index instead of embedding every frame and building it again, and `clip_embed` reuses the
vectors.

Files: `vectors.npy` (float32 unit vectors), `index.faiss` (a faiss CPU index, serialized; GPU
searches rebuild from the vectors) and `meta.json` (the embedding model, each vector's item key,
the set's key, timestamps, index kind, count), written last: a folder whose meta is missing or
does not match its vectors counts as no index. No pickles anywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .files import read_json, write_atomic, write_json

__all__ = ["SavedVectors"]


class SavedVectors:
    """The saved vectors (and index) in one video's index folder."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.vectors_path = self.folder / "vectors.npy"
        self.faiss_path = self.folder / "index.faiss"
        self.meta_path = self.folder / "meta.json"

    def meta(self) -> dict[str, Any] | None:
        meta = read_json(self.meta_path)
        return meta if isinstance(meta, dict) else None

    def set_key(self) -> str | None:
        """The key of the saved set (`Embeddings.set_key`), None without a readable one."""
        meta = self.meta()
        return None if meta is None else meta.get("set_key")

    def version(self) -> tuple | None:
        """Changes whenever the vectors are rewritten (None: nothing saved)."""
        try:
            return str(self.folder), self.vectors_path.stat().st_mtime_ns
        except OSError:
            return None

    def save(self, vectors: np.ndarray, meta: dict[str, Any], faiss_index: Any = None) -> None:
        """Write the vectors, the faiss CPU index when given, then the metadata."""
        import faiss

        write_atomic(self.vectors_path, lambda fh: np.save(fh, vectors))
        if faiss_index is not None:
            blob = faiss.serialize_index(faiss_index).tobytes()
            write_atomic(self.faiss_path, lambda fh: fh.write(blob))
        write_json(self.meta_path, {**meta, "count": len(vectors)})

    def read(self) -> tuple[np.ndarray, dict[str, Any], Any] | None:
        """(vectors, meta, faiss index or None), or None when nothing complete is saved."""
        meta = self.meta()
        try:
            vectors = np.load(self.vectors_path)
        except (OSError, ValueError):
            return None
        if meta is None or meta.get("count", len(vectors)) != len(vectors):
            return None
        index = None
        if self.faiss_path.is_file():
            import faiss

            index = faiss.deserialize_index(np.fromfile(self.faiss_path, dtype=np.uint8))
        return vectors, meta, index

    def for_model(self, model: str) -> dict[str, np.ndarray]:
        """{item key: vector} saved by `model` (empty when none, or another model's)."""
        meta = self.meta()
        if meta is None or meta.get("model") != model:
            return {}
        try:
            vectors = np.load(self.vectors_path)
        except (OSError, ValueError):
            return {}
        return dict(zip(meta.get("keys", []), vectors, strict=False))
