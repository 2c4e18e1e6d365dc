"""Query-aware retrieval of frames, tiles or regions: CLIP and text scores, MMR, time coverage."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field

from cascade.artifacts import Evidence, Image
from cascade.cache import LRUCache
from cascade.errors import InputError
from cascade.media import VideoSource
from cascade.stage import Stage, StageParams, stage
from cascade.trace import record

from ._retrieval import Embeddings, VectorIndex, index_dir_for, mmr_select, save_vectors

# Built indexes by (set key, kind, device): a second question on the same frames searches at once.
_INDEXES = LRUCache(2 * 2**30, size_of=lambda idx: idx.vectors.nbytes * 2)


def _saved_set_key(folder: Path | None) -> str | None:
    import json

    meta = folder / "meta.json" if folder is not None else None
    if meta is None or not meta.is_file():
        return None
    try:
        return json.loads(meta.read_text()).get("set_key")
    except (OSError, ValueError):
        return None  # a damaged index folder is rebuilt and overwritten


@stage("retrieve")
class Retrieve(Stage):
    """Pick the top-k items (frames, tiles, regions) for the question.

    Score = clip_weight * CLIP similarity + text_weight * text similarity (either side may be
    missing). Candidates come from a FAISS index (exact inner product; HNSW above
    `hnsw_threshold` vectors; faiss GPU or torch top-k on a GPU), then MMR (`mmr_lambda` < 1)
    trades relevance for diversity and `min_gap_s` keeps video picks apart in time. With
    `persist: true` and a `video`, the CLIP index is saved to `<video>.cascade-index/` (or
    `index_path`) and reloaded by later runs.
    """

    class Params(StageParams):
        top_k: int = Field(4, gt=0, le=1024, description="items to return")
        clip_weight: float = Field(1.0, ge=0, description="weight of the CLIP similarity")
        text_weight: float = Field(1.0, ge=0, description="weight of the text similarity")
        mmr_lambda: float = Field(1.0, ge=0, le=1, description="1 = pure relevance; lower = "
                                  "more diverse picks")
        min_gap_s: float = Field(0.0, ge=0, description="video: min seconds between picks")
        candidates: int = Field(64, gt=0, description="candidates per index search before MMR")
        index: Literal["auto", "flat", "hnsw"] = Field("auto", description="index type")
        hnsw_threshold: int = Field(50_000, gt=0, description="auto: HNSW above this many vectors")
        hnsw_m: int = Field(32, gt=1, le=256, description="HNSW graph degree")
        ef_search: int = Field(128, gt=0, description="HNSW search breadth (recall vs speed)")
        device: str = Field("auto", description="'auto' (GPU when present), 'cpu' or 'cuda'")
        order: Literal["score", "time"] = Field("score", description="output order; time = "
                                                "chronological (frames) / source order")
        persist: bool = Field(False, description="save/reload the CLIP index next to the video")
        index_path: str | None = Field(None, description="folder for the saved index")

    @dataclass(frozen=True)
    class Outputs:
        images: list[Image]
        scores: list[float]
        evidence: Evidence

    def _index(self, emb: Embeddings, video: Path | None) -> VectorIndex:
        p = self.params
        key = (emb.set_key(), p.index, p.hnsw_threshold, p.hnsw_m, p.device)
        folder = index_dir_for(video, p.index_path) if p.persist else None
        saved = _saved_set_key(folder) == emb.set_key()
        idx = _INDEXES.get(key)
        if idx is not None:
            record(index_cache_hits=1)
        elif saved:
            idx, _ = VectorIndex.load(folder, p.device)
            record(index_loaded=1)
        else:
            idx = VectorIndex.build(emb.vectors, p.index, p.hnsw_threshold, p.hnsw_m,
                                    ef_search=p.ef_search, device=p.device)
        _INDEXES.put(key, idx)
        if folder is not None and not saved:
            save_vectors(folder, emb, idx)
            record(index_saved=1)
        return idx

    def run(self, embeddings: Embeddings | None = None, text_embeddings: Embeddings | None = None,
            video: Path | VideoSource | None = None) -> Outputs:
        p = self.params
        sides = [(e, w, name) for e, w, name in ((embeddings, p.clip_weight, "embeddings"),
                                                 (text_embeddings, p.text_weight, "text_embeddings"))
                 if e is not None]
        if not sides:
            raise InputError("retrieve needs embeddings, text_embeddings or both")
        for e, _, name in sides:
            if e.query is None:
                raise InputError(f"retrieve: {name} has no query vector; give the embedding "
                                 "stage the question as its `text` input")
        if len(sides) == 2 and embeddings.keys != text_embeddings.keys:
            raise InputError(f"retrieve: embeddings ({len(embeddings.items)} items) and "
                             f"text_embeddings ({len(text_embeddings.items)} items) describe "
                             "different items; embed the same list with both")
        video_path = video.path if isinstance(video, VideoSource) else video
        items = sides[0][0].items
        n = len(items)
        n_cand = min(n, max(p.candidates, p.top_k * 4))
        cand: set[int] = set()
        for e, w, name in sides:
            if w == 0:
                continue
            if name == "embeddings":
                idx = self._index(e, video_path)
            else:  # text vectors are few and cheap; exact search, never persisted
                idx = VectorIndex.build(e.vectors, "flat", device="cpu")
            record(index_backend_gpu=int(idx.backend != "faiss-cpu"))
            _, ids = idx.search(e.query[None], n_cand)
            cand.update(int(i) for i in ids[0])
        cand_ids = np.array(sorted(cand), dtype=np.int64)
        score = np.zeros(len(cand_ids), np.float32)
        for e, w, _ in sides:
            score += w * (e.vectors[cand_ids] @ e.query)
        diversity = sides[0][0].vectors
        times = [getattr(it, "timestamp", None) for it in items]
        picks = mmr_select(cand_ids, score, diversity, p.top_k, p.mmr_lambda, times, p.min_gap_s)
        if p.order == "time":
            picks.sort(key=lambda c: (times[c[0]] if times[c[0]] is not None else 0.0, c[0]))
        images = [items[i] for i, _ in picks]
        scores = [float(s) for _, s in picks]
        record(retrieved=len(images), candidates=len(cand_ids))
        return self.Outputs(images, scores, Evidence(images=tuple(images), scores=tuple(scores)))
