"""Prefix reuse by blocks: a prompt whose leading blocks (system text and leading images) are cached
prefills only the rest, and answers with exactly the logits of a cold run (fp storage)."""

import pytest
import torch

from cascade.vlm import KVPrefixCache, ReductionConfig
from cascade.vlm.kv_cache import KVBlock

from ._reuse import Q, first_logits, load

pytestmark = pytest.mark.usefixtures("one_thread")  # bit-for-bit: see conftest

FAMILIES = ["tiny_path", "tiny_path_25", "tiny_path_qwen3", "tiny_path_idefics3"]


@pytest.fixture
def abc(make_image):
    return make_image(51), make_image(52, 120, 90), make_image(53, 90, 160)


@pytest.mark.parametrize("fixture", FAMILIES)
def test_append_prefills_only_the_new_image_and_text(request, fixture, abc):
    path = request.getfixturevalue(fixture)
    vlm, cold = load(path, kv_cache_bytes=64 << 20), load(path, encoder_cache_bytes=0)
    a, b, c = abc
    first = vlm.generate([a, b], Q, max_new_tokens=6)
    append = vlm.generate([a, b, c], Q, max_new_tokens=6)
    ref = cold.generate([a, b, c], Q, max_new_tokens=6)
    assert (first.bill.cache, append.bill.cache, ref.bill.cache) == ("miss", "partial", "off")
    visual_ab = first.bill.visual_tokens
    assert append.bill.cached_tokens >= visual_ab  # the system text, A and B
    assert append.bill.cached_tokens < append.bill.input_tokens
    assert (append.bill.images_encoded, append.bill.images_cached) == (1, 0)  # B and A: in the KV
    assert append.bill.computed_prefill_flops < append.bill.prefill_flops == ref.bill.prefill_flops
    assert append.token_ids == ref.token_ids and append.logprobs == ref.logprobs
    delta = (first_logits(vlm, [a, b, c]) - first_logits(cold, [a, b, c])).abs().max()
    assert float(delta) == 0.0  # bit for bit: the prefix is prefilled block by block either way
    again = vlm.generate([a, b, c], "Another question?", max_new_tokens=2)
    assert again.bill.cache == "hit" and again.bill.cached_tokens > append.bill.cached_tokens


def test_a_hit_reuses_the_whole_prefix_and_a_partial_what_leads(tiny_path, abc):
    a, b, c = abc
    vlm = load(tiny_path, kv_cache_bytes=64 << 20)
    ab = vlm.generate([a, b], Q, max_new_tokens=1).bill
    hit = vlm.generate([a, b], "Something else?", max_new_tokens=1).bill
    assert (
        hit.cache == "hit"
        and hit.cached_tokens == ab.visual_tokens + ab.prompt_tokens - _question_tokens(vlm, Q)
        and hit.computed_vision_flops == 0
    )
    # a subset that drops the first image, a reorder: the first block differs, nothing to reuse
    # without position-independent KV
    assert vlm.generate([b], Q, max_new_tokens=1).bill.cache == "miss"
    assert vlm.generate([c, a, b], Q, max_new_tokens=1).bill.cache == "miss"
    assert vlm.generate([b, a], Q, max_new_tokens=1).bill.cache == "partial"  # [B]'s first block
    # a new system prompt changes every block after it
    assert vlm.generate([a, b], Q, max_new_tokens=1, system_prompt="Be brief.").bill.cache == "miss"
    # the same media and system prompt, another reduction: another chain
    assert (
        vlm.generate(
            [a, b], Q, max_new_tokens=1, reduction=ReductionConfig("divprune", 0.5)
        ).bill.cache
        == "miss"
    )
    assert (
        vlm.generate(
            [a, b, c], Q, max_new_tokens=1, reduction=ReductionConfig("divprune", 0.5)
        ).bill.cache
        == "partial"
    )


def _question_tokens(vlm, question):
    b = vlm.backend
    _, suffix = b.layout.first_turn(1, None, question)
    return len(b.layout.tokenize(suffix))


@pytest.mark.parametrize("red", [ReductionConfig("divprune", 0.5), ReductionConfig("tower", 0.5)])
def test_partial_reuse_under_reduction_is_exact(tiny_path, abc, red):
    a, b, c = abc
    vlm, cold = load(tiny_path, kv_cache_bytes=64 << 20), load(tiny_path, encoder_cache_bytes=0)
    vlm.generate([a, b], Q, max_new_tokens=1, reduction=red)
    r = vlm.generate([a, b, c], Q, max_new_tokens=6, reduction=red)
    ref = cold.generate([a, b, c], Q, max_new_tokens=6, reduction=red)
    assert r.bill.cache == "partial" and r.token_ids == ref.token_ids
    assert (r.bill.visual_tokens, r.bill.vision_flops) == (
        ref.bill.visual_tokens,
        ref.bill.vision_flops,
    )
    assert torch.equal(
        first_logits(vlm, [a, b, c], red=red), first_logits(cold, [a, b, c], red=red)
    )


def test_sessions_and_int8_blocks(tiny_path, abc):
    a, b, c = abc
    vlm = load(tiny_path, kv_cache_bytes=64 << 20, kv_int8=True)
    vlm.generate([a, b], Q, max_new_tokens=1)
    s = vlm.session([a, b, c])
    r1, r2 = s.ask(Q, max_new_tokens=3), s.ask("And then?", max_new_tokens=3)
    assert (r1.bill.cache, r2.bill.cache) == ("partial", "session") and r1.bill.cached_tokens > 0
    assert s.vision_tower_calls == 1 and r1.bill.images_encoded == 1
    assert vlm.kv_cache.stats()["int8"] is True and all(
        vlm.kv_cache.get(k).quantized for k in list(vlm.kv_cache._items)
    )


def test_eviction_takes_the_ends_of_chains_first():
    def block(n):
        kv = [(torch.randn(1, 2, n, 8), torch.randn(1, 2, n, 8))]
        return KVBlock(
            kv, torch.zeros(n, dtype=torch.long), torch.ones(n, dtype=torch.bool), 0, 0, n
        )

    one = block(16).nbytes
    cache = KVPrefixCache(max_bytes=int(one * 3.5))
    keys = KVPrefixCache.chain("m", ("p",), ("none",), [("t0", "a"), ("t1", "b"), ("t2", None)])
    for k in keys:
        cache.put(k, block(16))
    assert len(cache.longest(keys)) == 3  # refreshed last block first: the first is the newest
    cache.put("other", block(16))  # evicts the least recently used: the chain's last block
    assert [k in cache for k in keys] == [True, True, False]
    assert len(cache.longest(keys)) == 2
    assert KVPrefixCache.chain("m", ("p",), ("none",), [("t0", "a")])[0] == keys[0]
    assert KVPrefixCache.chain("m", ("p",), ("none",), [("t0", "b")])[0] != keys[0]
