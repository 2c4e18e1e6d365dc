"""Content hashing of media and a byte-bounded LRU cache.

Keys are built from what the data *is* (key path, dtype, shape, bytes), in the vLLM multimodal-hash
style, so the same frame hashes the same whether it arrived as a numpy array, a tensor or an image,
and the same bytes with another shape or dtype never collide. Unknown types raise: a silent pickle
fallback would hash object identity or unstable reprs.
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["content_hash", "nbytes_of", "cache_dir", "LRUCache", "clear_all_caches"]


def _feed(h: hashlib.blake2b, key: str, obj: Any) -> None:
    h.update(key.encode() + b"\0")
    if obj is None or isinstance(obj, (bool, int, float, str)):
        h.update(f"{type(obj).__name__}:{obj!r}".encode())
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        h.update(b"bytes:" + bytes(obj))
    elif isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        h.update(f"ndarray:{arr.dtype.str}:{arr.shape}".encode())
        h.update(arr.view(np.uint8).reshape(-1).data if arr.size else b"")
    elif type(obj).__module__.startswith("torch") and hasattr(obj, "detach"):
        t = obj.detach().cpu().contiguous()
        h.update(f"tensor:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(__import__("torch").uint8).numpy().data if t.numel() else b"")
    elif hasattr(type(obj), "__content_hash__"):  # artifacts hash their pixels once and memoize
        h.update(f"hash:{obj.__content_hash__()}".encode())
    elif type(obj).__module__.startswith("PIL") and hasattr(obj, "tobytes"):
        h.update(f"pil:{obj.mode}:{obj.size}".encode())
        h.update(obj.tobytes())
    elif isinstance(obj, (list, tuple)):
        h.update(f"{type(obj).__name__}:{len(obj)}".encode())
        for i, item in enumerate(obj):
            _feed(h, f"{key}.{i}", item)
    elif isinstance(obj, dict):
        h.update(f"dict:{len(obj)}".encode())
        for k in sorted(obj, key=str):
            _feed(h, f"{key}.{k}", obj[k])
    else:
        raise TypeError(
            f"content_hash: cannot hash {type(obj).__name__} at '{key}'; "
            "pass arrays, tensors, PIL images, bytes, scalars or containers of them"
        )


def content_hash(obj: Any, key: str = "") -> str:
    """Hex digest of `obj` from its key path, dtype, shape and bytes (blake2b, 128 bit)."""
    h = hashlib.blake2b(digest_size=16)
    _feed(h, key or "root", obj)
    return h.hexdigest()


def nbytes_of(value: Any) -> int:
    """Bytes held by tensors/arrays inside `value` (containers and dataclass-like objects
    walked)."""
    if hasattr(value, "nbytes") and not isinstance(value, (list, tuple, dict)):
        n = value.nbytes
        return int(n() if callable(n) else n)
    if type(value).__module__.startswith("torch") and hasattr(value, "element_size"):
        return value.element_size() * value.numel()
    if isinstance(value, (list, tuple)):
        return sum(nbytes_of(v) for v in value)
    if isinstance(value, dict):
        return sum(nbytes_of(v) for v in value.values())
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if hasattr(value, "__dict__"):
        return sum(nbytes_of(v) for v in vars(value).values())
    return 0


def cache_dir(name: str) -> Path:
    """The on-disk cache folder `name` of vlm-cascade (tiny models, calibration, demo media,
    benchmark footage): under $VLM_CASCADE_CACHE, else ~/.cache/vlm-cascade."""
    root = os.environ.get("VLM_CASCADE_CACHE") or Path.home() / ".cache" / "vlm-cascade"
    return Path(root) / name


class LRUCache:
    """A thread-safe LRU mapping bounded by the bytes of its values, with hit/miss/evict counters.

    A value larger than the whole budget is not stored (it would evict everything and still not
    fit).
    """

    def __init__(self, max_bytes: int, size_of=nbytes_of):
        if max_bytes <= 0:
            raise ValueError(f"LRUCache max_bytes must be > 0, got {max_bytes}")
        self.max_bytes = int(max_bytes)
        self._size_of = size_of
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0
        self.hits = self.misses = self.evictions = 0
        _LIVE.add(self)

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            if key not in self._items:
                self.misses += 1
                return default
            self._items.move_to_end(key)
            self.hits += 1
            return self._items[key][0]

    def peek(self, key: Hashable, default: Any = None) -> Any:
        """The entry, neither counted as a hit or miss nor refreshed (a reader that is not a
        use: e.g. a prefill replica shipping a block it just stored)."""
        with self._lock:
            entry = self._items.get(key)
            return default if entry is None else entry[0]

    def put(self, key: Hashable, value: Any) -> bool:
        """Store `value`; returns False when it is larger than the whole budget."""
        size = int(self._size_of(value))
        with self._lock:
            if key in self._items:
                self.bytes -= self._items.pop(key)[1]
            if size > self.max_bytes:
                return False
            while self.bytes + size > self.max_bytes and self._items:
                _, (_, old) = self._items.popitem(last=False)
                self.bytes -= old
                self.evictions += 1
            self._items[key] = (value, size)
            self.bytes += size
            return True

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.bytes = 0

    def stats(self) -> dict[str, int]:
        return {
            "entries": len(self._items),
            "bytes": self.bytes,
            "max_bytes": self.max_bytes,
            "hits": self.hits,
            "misses": self.misses,
            "evictions": self.evictions,
        }


# Every live cache (embeddings, OCR/detector results, indexes, KV prefixes), so a benchmark can
# start a question cold without knowing where each stage keeps its cache.
_LIVE: weakref.WeakSet[LRUCache] = weakref.WeakSet()


def clear_all_caches() -> None:
    """Empty every content-keyed cache of this process (loaded models stay loaded)."""
    for cache in list(_LIVE):
        cache.clear()
