"""Content hashing is about content; the LRU is bounded in bytes."""

import numpy as np
import pytest
import torch
from PIL import Image as PILImage

from cascade import Frame, Image
from cascade.cache import LRUCache, content_hash


def test_same_bytes_other_shape_or_dtype_differ():
    a = np.arange(12, dtype=np.uint8)
    assert content_hash(a) != content_hash(a.reshape(3, 4))
    assert content_hash(a.reshape(3, 4)) != content_hash(a.reshape(4, 3))
    assert content_hash(a) != content_hash(a.view(np.int8))
    assert content_hash(np.zeros(4, np.float32)) != content_hash(np.zeros(16, np.uint8))


def test_non_contiguous_equals_contiguous():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    assert content_hash(a.T) == content_hash(np.ascontiguousarray(a.T))
    t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    assert content_hash(t.T) == content_hash(t.T.contiguous())


def test_key_path_and_container_structure_matter():
    a = np.ones(3)
    assert content_hash(a, key="x") != content_hash(a, key="y")
    assert content_hash([a, a]) != content_hash((a, a))
    assert content_hash({"a": 1, "b": 2}) == content_hash({"b": 2, "a": 1})
    assert content_hash(1) != content_hash("1") != content_hash(1.0)


def test_images_hash_by_pixels_not_by_where_they_came_from():
    px = np.random.default_rng(0).integers(0, 255, (8, 9, 3), dtype=np.uint8)
    assert content_hash(Image(px, source="a.png")) == content_hash(Image(px.copy(), source="b.png"))
    assert content_hash(Image(px)) == content_hash(Frame(px, timestamp=3.0))
    assert content_hash(PILImage.fromarray(px)) != content_hash(PILImage.fromarray(px).convert("L"))


def test_unknown_types_raise_instead_of_pickling():
    class Opaque:
        pass

    with pytest.raises(TypeError, match=r"cannot hash Opaque at 'root.1'"):
        content_hash([1, Opaque()])


def test_lru_evicts_least_recently_used_by_bytes():
    cache = LRUCache(max_bytes=300)
    for k in "abc":
        cache.put(k, np.zeros(100, np.uint8))
    assert cache.get("a") is not None  # a is now most recent
    cache.put("d", np.zeros(100, np.uint8))  # evicts b
    assert "b" not in cache and "a" in cache and "d" in cache
    assert cache.bytes == 300 and cache.evictions == 1
    cache.put("big", np.zeros(250, np.uint8))  # evicts c, a (oldest) to fit
    assert set(["big"]) <= {k for k in ["abcd", "big"] if k in cache}
    assert cache.bytes <= 300
    assert cache.put("huge", np.zeros(301, np.uint8)) is False and "huge" not in cache
    stats = cache.stats()
    assert stats["hits"] == 1 and stats["max_bytes"] == 300


def test_lru_counts_tensor_bytes_and_replaces_same_key():
    cache = LRUCache(max_bytes=10_000)
    cache.put("k", (torch.zeros(100, dtype=torch.float16), torch.zeros(100)))
    assert cache.bytes == 200 + 400
    cache.put("k", torch.zeros(10))
    assert cache.bytes == 40 and len(cache) == 1
    assert cache.get("missing") is None and cache.misses == 1
