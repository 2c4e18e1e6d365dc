"""Position-independent image KV (opt-in): a moved image's KV reused with its keys re-rotated;
off by default; the drift against a full recompute is measured by benchmarks/reuse.py."""

import pytest
import torch

from cascade.errors import InputError
from cascade.vlm.position_free import rerotate, shift_of

from ._reuse import Q, first_logits, load

pytestmark = pytest.mark.usefixtures("one_thread")  # bit-for-bit: see conftest


@pytest.fixture
def abc(make_image):
    return make_image(61), make_image(62, 120, 90), make_image(63, 90, 160)


@pytest.mark.parametrize(
    "fixture", ["tiny_path", "tiny_path_25", "tiny_path_qwen3", "tiny_path_idefics3"]
)
def test_rerotation_equals_rotating_at_the_new_position(request, fixture):
    """R(p + d) = R(d) R(p) with the model's own rotary module, M-RoPE rows shifted together."""
    rt = load(request.getfixturevalue(fixture), encoder_cache_bytes=0).backend.runtime
    torch.manual_seed(0)
    cfg = rt.text_config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    k = torch.randn(1, cfg.num_key_value_heads, 12, head_dim)
    grid = torch.stack(
        [torch.zeros(12, dtype=torch.long), torch.arange(12) // 4, torch.arange(12) % 4]
    )
    p = (grid + 7)[: rt.position_rows] if rt.position_rows == 3 else torch.arange(12)[None] + 7

    def rotate(x, positions):
        cos, sin = rt.rotary(x.new_zeros(1, 12, 1), positions)
        half = x.shape[-1] // 2
        return x * cos.unsqueeze(1) + torch.cat(
            [-x[..., half:], x[..., :half]], -1
        ) * sin.unsqueeze(1)

    for d in (5, -3, 40):
        (moved,) = rerotate(rt, [rotate(k, p)], d)
        torch.testing.assert_close(moved, rotate(k, p + d), rtol=1e-5, atol=1e-5)
    assert shift_of(p, p + 9) == 9 and shift_of(p, p + torch.arange(12)) is None


def test_off_by_default_and_needs_the_kv_cache(tiny_path, abc):
    a, b, c = abc
    vlm = load(tiny_path, kv_cache_bytes=64 << 20)
    vlm.generate([a, b, c], Q, max_new_tokens=1)
    assert vlm.generate([c, a, b], Q, max_new_tokens=1).bill.cache == "miss"
    with pytest.raises(InputError, match="kv_cache_bytes"):
        load(tiny_path, kv_position_independent=True)
    with pytest.raises(InputError, match="kv_recompute_image_tokens"):
        load(
            tiny_path,
            kv_cache_bytes=1 << 20,
            kv_position_independent=True,
            kv_recompute_image_tokens=-1,
        )


def test_yaml_options_are_checked_where_they_are_written():
    from pydantic import ValidationError

    from cascade.vlm.options import ModelSpec

    spec = ModelSpec.model_validate({"id": "x", "kv_position_independent": True})
    assert spec.kv_recompute_image_tokens == 16 and spec.loader_options()["kv_position_independent"]
    assert ModelSpec.model_validate({"id": "x"}).kv_position_independent is False
    with pytest.raises(ValidationError, match="kv_cache_bytes > 0"):
        ModelSpec.model_validate({"id": "x", "kv_position_independent": True, "kv_cache_bytes": 0})
    with pytest.raises(ValidationError, match="kv_recompute_image_tokens"):
        ModelSpec.model_validate({"id": "x", "kv_recompute_image_tokens": -1})


@pytest.mark.parametrize("fixture", ["tiny_path", "tiny_path_25", "tiny_path_qwen3"])
def test_a_reorder_reuses_every_image_and_prefills_text_and_leading_tokens(request, fixture, abc):
    path = request.getfixturevalue(fixture)
    a, b, c = abc
    vlm = load(
        path, kv_cache_bytes=64 << 20, kv_position_independent=True, kv_recompute_image_tokens=2
    )
    cold = load(path, encoder_cache_bytes=0)
    vlm.generate([a, b, c], Q, max_new_tokens=1)
    r = vlm.generate([c, a, b], Q, max_new_tokens=4)
    ref = cold.generate([c, a, b], Q, max_new_tokens=4)
    assert r.bill.cache == "blended" and r.bill.images_encoded == 0  # the encoder cache has them
    # every image's tokens but its first 2 came from the cache
    assert r.bill.cached_tokens == r.bill.visual_tokens - 3 * 2
    assert r.bill.computed_prefill_flops < 0.6 * r.bill.prefill_flops
    assert (r.bill.visual_tokens, r.bill.prompt_tokens) == (
        ref.bill.visual_tokens,
        ref.bill.prompt_tokens,
    )
    drift = (first_logits(vlm, [c, a, b]) - first_logits(cold, [c, a, b])).abs().max()
    assert (
        0 < float(drift) < float("inf")
    )  # approximate, by design; measured in benchmarks/reuse.py
    # blended KV never enters the exact block chains: a repeat is blended again, not a "hit"
    assert vlm.generate([c, a, b], Q, max_new_tokens=1).bill.cache == "blended"
    # recomputing at least every token of each image is the exact path
    exact = load(
        path, kv_cache_bytes=64 << 20, kv_position_independent=True, kv_recompute_image_tokens=10**6
    )
    exact.generate([a, b, c], Q, max_new_tokens=1)
    r2 = exact.generate([c, a, b], Q, max_new_tokens=4)
    assert r2.bill.cache == "miss" and r2.token_ids == ref.token_ids
    assert torch.equal(first_logits(exact, [c, a, b]), first_logits(cold, [c, a, b]))


def test_idefics3_tiled_images_fall_back_to_prefill(tiny_path_idefics3, abc):
    a, b, _ = abc
    kw = dict(kv_cache_bytes=64 << 20, kv_position_independent=True, kv_recompute_image_tokens=2)
    tiled = load(tiny_path_idefics3, **kw)  # the tiny processor splits every image into 2x2 tiles
    tiled.generate([a, b], Q, max_new_tokens=1)
    assert tiled.generate([b, a], Q, max_new_tokens=1).bill.cache == "miss"
    one_tile = load(tiny_path_idefics3, longest_edge=64, **kw)  # each image is one tile
    assert one_tile.family.image_cost(a.width, a.height).tokens == 16
    one_tile.generate([a, b], Q, max_new_tokens=1)
    r = one_tile.generate([b, a], Q, max_new_tokens=2)
    assert r.bill.cache == "blended" and r.bill.cached_tokens == 2 * (16 - 2)
