"""Process-wide sharing for the perception stages: one loaded model per key, result caches.

Two stages (or two pipelines, or two questions) that use the same model with the same params get
the same loaded object, so a model is never loaded twice in one process. Inference on a shared
model goes through its lock: ultralytics predictors and rapidocr engines keep per-call state.
(VLMs are declared in a pipeline's `models:` block and shared by `cascade.models`.)
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from cascade.cache import LRUCache
from cascade.devices import pick_device

__all__ = ["Shared", "shared_model", "clear_shared", "pick_device", "result_cache", "as_image_list",
           "bound_pixels"]


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


def clear_shared() -> None:
    """Forget every loaded model (tests; frees memory once no stage holds them)."""
    with _GUARD:
        _MODELS.clear()
        _KEY_LOCKS.clear()


def result_cache(shared: Shared, name: str, max_items: int) -> LRUCache:
    """A per-model LRU of small per-image results (OCR lines, detections), bounded by item count."""
    with _GUARD:
        cache = shared.extra.get(name)
        if cache is None:
            cache = shared.extra[name] = LRUCache(max(1, max_items), size_of=lambda v: 1)
        return cache


def as_image_list(images: Any) -> list:
    """Stages take `images: list[Image] | Image`; inside they always work on a list."""
    from cascade.artifacts import Image
    from cascade.errors import InputError

    items = [images] if isinstance(images, Image) else list(images or [])
    for i, im in enumerate(items):
        if not isinstance(im, Image):
            raise InputError(f"images[{i}] is {type(im).__name__}, expected a cascade Image")
    return items


def bound_pixels(images: list, min_pixels: int | None, max_pixels: int | None) -> list:
    """Each image scaled (aspect kept) into [min_pixels, max_pixels] pixels, as vLLM's
    `min_pixels` / `max_pixels` bound what a Qwen-VL model sees; in bounds, unchanged. The model's
    processor then applies its own limits and rounds to its patch grid."""
    import math

    out = []
    for im in images:
        n = im.width * im.height
        if max_pixels is not None and n > max_pixels:
            f = math.sqrt(max_pixels / n)
            im = im.resized(max(1, math.floor(im.width * f)), max(1, math.floor(im.height * f)))
        elif min_pixels is not None and n < min_pixels:
            f = math.sqrt(min_pixels / n)
            im = im.resized(math.ceil(im.width * f), math.ceil(im.height * f))
        out.append(im)
    return out

