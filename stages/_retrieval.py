"""Vector search for retrieval, usable without any stage: indexes, MMR, temporal coverage, hybrid.

    idx = VectorIndex.build(vectors)                # flat inner product, HNSW above a threshold
    scores, ids = idx.search(queries, k)            # faiss GPU / torch GPU / faiss CPU
    picks = mmr_select(ids[0], scores[0], vectors, k=4, lam=0.7, times=ts, min_gap=2.0)

All vectors are float32 and L2-normalised, so inner product is cosine similarity. Where the
search runs: faiss's GPU index when faiss was built with GPU support and a GPU is present; else,
on a GPU, an exact torch top-k (`cascade.kernels.topk.similarity_topk` when importable); else faiss
on the CPU (exact `IndexFlatIP`, or `IndexHNSWFlat` once the set exceeds `hnsw_threshold`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from cascade.artifacts import Image
from cascade.cache import content_hash
from cascade.index import SavedVectors

if TYPE_CHECKING:
    import torch

__all__ = ["Embeddings", "VectorIndex", "mmr_select", "normalize"]

IndexKind = Literal["auto", "flat", "hnsw"]


def normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero: an empty document matches nothing)."""
    x = np.asarray(x, dtype=np.float32)
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.where(n > 0, x / np.maximum(n, 1e-12), 0).astype(np.float32)


@dataclass(frozen=True, eq=False)
class Embeddings:
    """Unit vectors for a list of items (frames, tiles, regions), aligned by position, plus the
    query vector from the same model (or None), the model name and each item's content key."""

    vectors: np.ndarray
    items: tuple[Image, ...]
    model: str
    query: np.ndarray | None = None
    keys: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()  # the document of each item, for text embeddings
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.vectors.ndim != 2 or len(self.vectors) != len(self.items):
            raise ValueError(
                f"Embeddings: {len(self.items)} items but vectors of shape {self.vectors.shape}"
            )

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def set_key(self) -> str:
        """Identity of the whole set (model + item keys): names cached and saved indexes."""
        return content_hash([self.model, list(self.keys)], key="embeddings")

    def describe(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "count": len(self.items),
            "dim": self.dim,
            "has_query": self.query is not None,
            **({"texts": list(self.texts)} if self.texts else {}),
        }


def _faiss_gpu_available(faiss) -> bool:
    try:
        return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0
    except Exception:
        return False


class VectorIndex:
    """A searchable set of unit vectors; `backend` says where searches run."""

    def __init__(self, vectors: np.ndarray, kind: str, backend: str, index: Any = None):
        self.vectors, self.kind, self.backend, self._index = vectors, kind, backend, index
        self._gpu_keys: torch.Tensor | None = None
        self._gpu_res: Any = None  # faiss-gpu's resources, kept alive as long as the index

    @classmethod
    def build(
        cls,
        vectors: np.ndarray,
        kind: IndexKind = "auto",
        hnsw_threshold: int = 50_000,
        hnsw_m: int = 32,
        ef_construction: int = 200,
        ef_search: int = 128,
        device: str = "auto",
    ) -> VectorIndex:
        import faiss

        index: faiss.Index
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        n, dim = vectors.shape
        if kind == "auto":
            kind = "hnsw" if n > hnsw_threshold else "flat"
        use_cuda = device == "cuda" or (device == "auto" and _cuda_available())
        if use_cuda and _faiss_gpu_available(faiss):
            res = faiss.StandardGpuResources()
            index = faiss.index_cpu_to_gpu(res, 0, faiss.IndexFlatIP(dim))
            index.add(vectors)
            out = cls(vectors, "flat", "faiss-gpu", index)
            out._gpu_res = res  # keep the resources alive as long as the index
            return out
        if use_cuda:  # exact search on the GPU beats an approximate CPU index at these sizes
            return cls(vectors, "flat", "torch-gpu")
        if kind == "hnsw":
            hnsw = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
            hnsw.hnsw.efConstruction = ef_construction
            hnsw.hnsw.efSearch = ef_search
            index = hnsw
        else:
            index = faiss.IndexFlatIP(dim)
        index.add(vectors)
        return cls(vectors, kind, "faiss-cpu", index)

    def __len__(self) -> int:
        return len(self.vectors)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores [Q, k] descending, ids [Q, k]); k is clipped to the set size."""
        q = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        k = max(1, min(int(k), len(self)))
        if self.backend == "torch-gpu":
            return self._torch_search(q, k)
        scores, ids = self._index.search(q, k)
        if self.kind == "hnsw":  # HNSW may return -1 for unfilled slots with tiny ef
            ok = ids >= 0
            scores, ids = np.where(ok, scores, -np.inf), np.where(ok, ids, 0)
        return scores, ids

    def _torch_search(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import torch

        if self._gpu_keys is None:
            self._gpu_keys = torch.from_numpy(self.vectors).cuda()
        qt = torch.from_numpy(q).cuda()
        try:
            from cascade.kernels.topk import similarity_topk
        except ImportError:
            scores, ids = torch.topk(qt @ self._gpu_keys.T, k, dim=1)
        else:
            scores, ids = similarity_topk(qt, self._gpu_keys, k, normalize=False)
        return scores.float().cpu().numpy(), ids.cpu().numpy()

    # -- persistence in a video's index (faiss CPU indexes; GPU backends rebuild from the vectors)
    def save(self, store: SavedVectors, emb: Embeddings) -> None:
        """Save the vectors of `emb` and this index (`cascade.index.SavedVectors`)."""
        store.save(
            self.vectors,
            {
                "model": emb.model,
                "keys": list(emb.keys),
                "set_key": emb.set_key(),
                "kind": self.kind,
                "timestamps": [getattr(i, "timestamp", None) for i in emb.items],
            },
            self._index if self.backend == "faiss-cpu" else None,
        )

    @classmethod
    def load(cls, store: SavedVectors, device: str = "auto") -> VectorIndex | None:
        """The saved index, or None when nothing complete is saved."""
        saved = store.read()
        if saved is None:
            return None
        vectors, meta, faiss_index = saved
        use_cuda = device == "cuda" or (device == "auto" and _cuda_available())
        if faiss_index is not None and not use_cuda:
            return cls(vectors, meta["kind"], "faiss-cpu", faiss_index)
        return cls.build(vectors, meta.get("kind", "flat"), device=device)


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def mmr_select(
    candidates: np.ndarray,
    relevance: np.ndarray,
    vectors: np.ndarray,
    k: int,
    lam: float = 1.0,
    times: list[float | None] | None = None,
    min_gap: float = 0.0,
) -> list[tuple[int, float]]:
    """Maximal marginal relevance: greedily take the candidate maximising
    lam * relevance - (1 - lam) * (max similarity to those already taken); lam=1 is plain top-k.
    With `times` and `min_gap` > 0, a candidate closer than `min_gap` seconds to a pick is skipped.
    Returns [(item id, relevance)] in pick order."""
    cand = [int(c) for c in candidates]
    rel = {c: float(r) for c, r in zip(cand, relevance, strict=True)}
    picked: list[int] = []
    max_sim = {c: -np.inf for c in cand}
    while cand and len(picked) < k:
        best: int | None = None
        best_val = -np.inf
        for c in cand:
            div = max_sim[c] if picked and lam < 1 else 0.0
            val = lam * rel[c] - (1 - lam) * div
            if val > best_val:
                best, best_val = c, val
        if best is None:
            raise ValueError("mmr_select: no candidate has a relevance above -inf")
        picked.append(best)
        cand.remove(best)
        if times is not None and min_gap > 0 and (t_best := times[best]) is not None:
            cand = [c for c in cand if (t := times[c]) is None or abs(t - t_best) >= min_gap]
        if cand and lam < 1:
            sims = vectors[cand] @ vectors[best]
            for c, s in zip(cand, sims, strict=True):
                max_sim[c] = max(max_sim[c], float(s))
    return [(c, rel[c]) for c in picked]
