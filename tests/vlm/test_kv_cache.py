import pytest
import torch

from cascade.vlm import VLM, KVPrefixCache, PrefixState, ReductionConfig
from cascade.vlm.kv_cache import dequantize_kv, quantize_kv


@pytest.fixture
def cached_vlm(tiny_path):
    return VLM.load(str(tiny_path), device="cpu", kv_cache_bytes=64 << 20)


@pytest.mark.parametrize(
    "red", [ReductionConfig(), ReductionConfig("divprune", 0.5), ReductionConfig("pool", 0.25)]
)
def test_hit_gives_the_tokens_of_recomputation(cached_vlm, vlm, make_image, red):
    img = make_image(7)
    first = cached_vlm.generate([img], "What is this?", max_new_tokens=10, reduction=red)
    hit = cached_vlm.generate([img], "How many people?", max_new_tokens=10, reduction=red)
    recompute = vlm.generate([img], "How many people?", max_new_tokens=10, reduction=red)
    assert (first.bill.cache, hit.bill.cache, recompute.bill.cache) == ("miss", "hit", "off")
    assert hit.token_ids == recompute.token_ids
    assert hit.bill.vision_s == 0.0 and cached_vlm.vision_tower_calls == 1
    assert hit.bill.computed_prefill_flops < 0.5 * hit.bill.prefill_flops
    assert hit.bill.prefill_flops == recompute.bill.prefill_flops


def test_key_covers_media_reduction_and_system_prompt_not_question(cached_vlm, make_image):
    a, b = make_image(8), make_image(9)
    cached_vlm.generate([a], "q1", max_new_tokens=1)
    assert cached_vlm.generate([a], "another question", max_new_tokens=1).bill.cache == "hit"
    assert cached_vlm.generate([b], "q1", max_new_tokens=1).bill.cache == "miss"
    # the system text and a lead the prompt: that block is reused, b's and the text after prefilled
    assert cached_vlm.generate([a, b], "q1", max_new_tokens=1).bill.cache == "partial"
    assert (
        cached_vlm.generate(
            [a], "q1", max_new_tokens=1, reduction=ReductionConfig("dart", 0.5)
        ).bill.cache
        == "miss"
    )
    assert (
        cached_vlm.generate([a], "q1", max_new_tokens=1, system_prompt="Be brief.").bill.cache
        == "miss"
    )
    same_pixels = type(a)(a.pixels.copy(), source="elsewhere.png")
    assert cached_vlm.generate([same_pixels], "q1", max_new_tokens=1).bill.cache == "hit"
    stats = cached_vlm.kv_cache.stats()  # counted per block: an image's and the text after them
    assert stats["hits"] == 2 + 1 + 2 and stats["misses"] == 5 and stats["entries"] == 5 * 2


def _state(n_tokens: int, layers: int = 2) -> PrefixState:
    kv = [(torch.randn(1, 2, n_tokens, 8), torch.randn(1, 2, n_tokens, 8)) for _ in range(layers)]
    return PrefixState(kv, n_tokens, n_tokens, n_tokens, n_tokens, 0)


def test_lru_evicts_by_bytes():
    one = _state(16).nbytes
    cache = KVPrefixCache(max_bytes=int(one * 2.5))
    for k in "abc":
        cache.put(k, _state(16))
    assert "a" not in cache and "b" in cache and "c" in cache
    assert cache.evictions == 1 and cache.bytes == 2 * one
    cache.get("b")
    cache.put("d", _state(16))  # "c" is now least recently used
    assert "c" not in cache and "b" in cache
    huge = KVPrefixCache(max_bytes=one // 2)
    huge.put("big", _state(16))  # larger than the whole budget: not kept
    assert len(huge) == 0


def test_int8_error_is_bounded_and_memory_smaller():
    torch.manual_seed(0)
    k = torch.randn(1, 2, 64, 16) * torch.linspace(0.1, 4, 16)  # outlier channels in keys
    v = torch.randn(1, 2, 64, 16)
    dk, dv = dequantize_kv(quantize_kv(k, v))
    assert dk.dtype == k.dtype and dk.shape == k.shape
    # symmetric int8: error at most half a step of each scale
    assert ((dk - k).abs() <= k.abs().amax(-2, keepdim=True) / 127 / 2 + 1e-6).all()
    assert ((dv - v).abs() <= v.abs().amax(-1, keepdim=True) / 127 / 2 + 1e-6).all()
    fp = _state(64)
    cache = KVPrefixCache(1 << 30, int8=True)
    cache.put("x", fp)
    q = cache.get("x")
    assert q.quantized and q.nbytes < fp.nbytes / 3
    for (a, b), (c, d) in zip(fp.kv(), q.kv(), strict=True):
        assert (c - a).norm() / a.norm() < 0.02 and (d - b).norm() / b.norm() < 0.02


def test_int8_cache_hits_and_generates(tiny_path, make_image):
    vlm = VLM.load(str(tiny_path), device="cpu", kv_cache_bytes=64 << 20, kv_int8=True)
    img = make_image(10)
    miss = vlm.generate([img], "What?", max_new_tokens=6)
    hit = vlm.generate([img], "What?", max_new_tokens=6)
    assert hit.bill.cache == "hit" and len(hit.token_ids) >= 1
    assert vlm.kv_cache.stats()["int8"] is True
    assert miss.token_ids[0] == hit.token_ids[0]  # tiny int8 error; first token unchanged here


def test_int8_put_quantizes_all_layers_in_one_call(monkeypatch):
    from cascade.kernels.kv_quant import reference

    calls = []
    real = reference.quantize
    monkeypatch.setattr(reference, "quantize", lambda ks, vs: calls.append(len(ks)) or real(ks, vs))
    fp = _state(16, layers=5)
    cache = KVPrefixCache(1 << 30, int8=True)
    cache.put("x", fp)
    q = cache.get("x")
    assert calls == [5] and q.layers.k.shape == (5, 1, 2, 16, 8)
    restored = q.kv()
    assert len(restored) == 5
    for (a, b), (c, d) in zip(fp.kv(), restored, strict=True):
        assert c.shape == a.shape and d.shape == b.shape
        assert (c - a).norm() / a.norm() < 0.02 and (d - b).norm() / b.norm() < 0.02
