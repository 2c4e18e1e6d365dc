"""The encoder-output cache: the vision tower runs once per image, and what it serves is exactly
what the tower computes (same tokens, same logits as a cold run)."""

import pytest
import torch

from cascade.vlm import ReductionConfig
from cascade.vlm.encoder_cache import EncodedImage, EncoderCache
from cascade.vlm.reduction import KeepRegions

from ._reuse import Q, first_logits, load

pytestmark = pytest.mark.usefixtures("one_thread")  # bit-for-bit: see conftest

FAMILIES = ["tiny_path", "tiny_path_25", "tiny_path_qwen3", "tiny_path_idefics3"]


@pytest.fixture
def abc(make_image):
    return make_image(41), make_image(42, 120, 90), make_image(43, 90, 160)


@pytest.mark.parametrize("fixture", FAMILIES)
def test_only_unseen_images_are_encoded(request, fixture, abc):
    path = request.getfixturevalue(fixture)
    vlm, cold = load(path), load(path, encoder_cache_bytes=0)
    a, b, c = abc
    first = vlm.generate([a, b], Q, max_new_tokens=6)
    assert (first.bill.images_encoded, first.bill.images_cached) == (2, 0)
    calls, images = vlm.vision_tower_calls, vlm.vision_images_encoded
    append = vlm.generate([a, b, c], Q, max_new_tokens=6)  # [A, B] -> [A, B, C]: only C
    assert (append.bill.images_encoded, append.bill.images_cached) == (1, 2)
    assert (vlm.vision_tower_calls - calls, vlm.vision_images_encoded - images) == (1, 1)
    reorder = vlm.generate([c, a, b], Q, max_new_tokens=6)  # [A, B, C] -> [C, A, B]: none
    subset = vlm.generate([b], Q, max_new_tokens=6)  # [A, B, C] -> [B]: none
    for r in (reorder, subset):
        assert r.bill.images_encoded == 0 and r.bill.computed_vision_flops == 0.0
        assert r.bill.vision_flops > 0  # billed as if cold; computed says what ran
    assert (reorder.bill.images_cached, subset.bill.images_cached) == (3, 1)
    assert vlm.vision_images_encoded - images == 1
    # identical to a cold run: greedy tokens, and the first token's logits bit for bit
    for images, r in (([a, b, c], append), ([c, a, b], reorder), ([b], subset)):
        ref = cold.generate(images, Q, max_new_tokens=6)
        assert r.token_ids == ref.token_ids and r.logprobs == ref.logprobs
        assert torch.equal(first_logits(vlm, images), first_logits(cold, images))


def test_features_of_an_image_do_not_depend_on_its_neighbours(request, abc):
    """Why serving one image's tower output from the cache is exact: each family's tower attends
    within an image (Qwen: cu_seqlens; Idefics3: per tile), so encoding it alone gives the bits
    it gets among others."""
    for fixture in FAMILIES:
        rt = load(request.getfixturevalue(fixture), encoder_cache_bytes=0).backend.runtime
        items = rt.preprocess([im.to_pil() for im in abc])
        with torch.inference_mode():
            together = rt.encode(rt.collate(items))
            alone = [f for it in items for f in rt.encode(rt.collate([it]))]
        assert len(together) == len(alone)
        assert all(torch.equal(x, y) for x, y in zip(together, alone, strict=True)), fixture


def test_key_covers_preprocessing_and_tower_reduction_not_after_tower_methods(tiny_path, abc):
    a = abc[0]
    vlm = load(tiny_path)
    assert vlm.generate([a], Q, max_new_tokens=1).bill.images_encoded == 1
    # after-tower reductions run on the cached output
    for red in (ReductionConfig("divprune", 0.5), ReductionConfig("pool", 0.25)):
        r = vlm.generate([a], Q, max_new_tokens=1, reduction=red)
        assert (r.bill.images_encoded, r.bill.images_cached) == (0, 1)
    # a reduction before the tower encodes other patches: its own entry, per keep ratio and regions
    tower = ReductionConfig("tower", 0.5)
    assert vlm.generate([a], Q, max_new_tokens=1, reduction=tower).bill.images_encoded == 1
    assert vlm.generate([a], Q, max_new_tokens=1, reduction=tower).bill.images_encoded == 0
    assert (
        vlm.generate(
            [a], Q, max_new_tokens=1, reduction=ReductionConfig("tower", 0.25)
        ).bill.images_encoded
        == 1
    )
    guided = ReductionConfig(
        "tower", 0.5, keep_regions=(KeepRegions((a.width, a.height), ((0, 0, 40, 40),)),)
    )
    assert vlm.generate([a], Q, max_new_tokens=1, reduction=guided).bill.images_encoded == 1
    # other image limits (preprocessing) are another model input
    small = load(tiny_path, max_pixels=28 * 28 * 4, encoder_cache=vlm.backend.encoder_cache)
    assert small.generate([a], Q, max_new_tokens=1).bill.images_encoded == 1
    assert len(vlm.backend.encoder_cache) == 5


def test_tower_reduction_served_from_the_cache_is_exact(tiny_path, abc):
    a, b, _ = abc
    tower = ReductionConfig("tower", 0.5)
    vlm, cold = load(tiny_path), load(tiny_path, encoder_cache_bytes=0)
    vlm.generate([a], Q, max_new_tokens=1, reduction=tower)
    r = vlm.generate([b, a], Q, max_new_tokens=6, reduction=tower)
    ref = cold.generate([b, a], Q, max_new_tokens=6, reduction=tower)
    assert (r.bill.images_encoded, r.bill.images_cached) == (1, 1)
    assert r.token_ids == ref.token_ids and r.bill.vision_flops == ref.bill.vision_flops
    assert 0 < r.bill.computed_vision_flops < ref.bill.computed_vision_flops
    assert torch.equal(first_logits(vlm, [b, a], red=tower), first_logits(cold, [b, a], red=tower))


def test_shared_by_batches_sessions_fastv_and_repeats_in_one_prompt(tiny_path, abc):
    a, b, c = abc
    vlm = load(tiny_path)
    assert vlm.generate([a, a], Q, max_new_tokens=1).bill.images_encoded == 1  # once per call
    batch = vlm.generate_batch([([a], Q), ([b, a], Q), ([b], Q)], max_new_tokens=2)
    assert [r.bill.images_encoded for r in batch] == [0, 1, 0]  # b billed to its first request
    assert [r.bill.images_cached for r in batch] == [1, 1, 0]
    s = vlm.session([b, a])
    assert s.ask(Q, max_new_tokens=1).bill.images_encoded == 0 and s.vision_tower_calls == 0
    fastv = vlm.generate(
        [c, a], Q, max_new_tokens=1, reduction=ReductionConfig("fastv", 0.5, fastv_layer=1)
    )
    assert (fastv.bill.images_encoded, fastv.bill.images_cached) == (1, 1)


def test_shared_across_pipelines_of_one_loaded_model(tiny_path, abc, tmp_path):
    """Pipelines declaring the same model share one loaded model, hence one encoder cache."""
    from cascade.models import Models, release_models

    release_models()
    spec = {"vlm": {"id": str(tiny_path), "device": "cpu", "kv_cache_bytes": 0}}
    one, two = Models(spec), Models(spec)
    try:
        first = one["vlm"].vlm.generate([abc[0]], Q, max_new_tokens=1)
        again = two["vlm"].vlm.generate([abc[0], abc[1]], Q, max_new_tokens=1)
        assert (first.bill.images_encoded, again.bill.images_encoded, again.bill.images_cached) == (
            1,
            1,
            1,
        )
    finally:
        release_models()


def test_byte_bound_evicts_least_recently_used():
    def entry(n):
        return EncodedImage((torch.zeros(n, 8),))

    one = entry(16).nbytes
    cache = EncoderCache(max_bytes=int(one * 2.5))
    for k in "abc":
        cache.put(k, entry(16))
    assert "a" not in cache and len(cache) == 2 and cache.evictions == 1 and cache.bytes == 2 * one
    cache.get("b")
    cache.put("d", entry(16))
    assert "c" not in cache and "b" in cache
    assert EncoderCache.key("m", ("p",), "h", ("none",)) != EncoderCache.key(
        "m", ("p",), "h", ("tower", 0.5)
    )


def test_encoder_cache_bytes_validates_in_yaml_and_zero_turns_it_off(tiny_path, abc):
    from pydantic import ValidationError

    from cascade.vlm.options import ModelSpec

    spec = ModelSpec.model_validate({"id": "x"})
    assert spec.encoder_cache_bytes == 256 << 20
    with pytest.raises(ValidationError, match="encoder_cache_bytes"):
        ModelSpec.model_validate({"id": "x", "encoder_cache_bytes": -1})
    off = load(tiny_path, encoder_cache_bytes=0)
    assert off.backend.encoder_cache is None
    off.generate([abc[0]], Q, max_new_tokens=1)
    assert off.generate([abc[0]], Q, max_new_tokens=1).bill.images_encoded == 1
