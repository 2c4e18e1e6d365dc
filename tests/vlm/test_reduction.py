import pytest
import torch

from cascade.errors import InputError
from cascade.vlm import ReductionConfig, reduction_names
from cascade.vlm.reduction import keep_count, reduce_tokens


def _tokens(n=48, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g)


@pytest.mark.parametrize("method", ["divprune", "visionzip", "dart"])
@pytest.mark.parametrize("ratio", [1.0, 0.5, 0.25, 0.1])
def test_count_exact_methods_keep_the_requested_count(method, ratio):
    x = _tokens()
    r = reduce_tokens(x, (1, 6, 8), ReductionConfig(method, ratio))
    assert r.embeds.shape == (keep_count(48, ratio), 16)
    assert r.index.tolist() == sorted(set(r.index.tolist()))  # unique, ascending
    if ratio == 1.0:
        assert torch.equal(r.embeds, x)


def test_pool_is_2x2_average_at_quarter():
    x = _tokens(48)
    r = reduce_tokens(x, (1, 6, 8), ReductionConfig("pool", 0.25))
    assert r.embeds.shape == (12, 16)
    grid = x.reshape(6, 8, 16)
    torch.testing.assert_close(r.embeds[0], grid[:2, :2].reshape(4, 16).mean(0))
    torch.testing.assert_close(r.embeds[-1], grid[4:, 6:].reshape(4, 16).mean(0))
    # each pooled token takes the position of a token inside its own 2x2 bin
    rows, cols = r.index // 8, r.index % 8
    assert (rows // 2 * 4 + cols // 2).tolist() == list(range(12))


def test_divprune_prefers_diverse_tokens():
    base = _tokens(4, 16, seed=1)
    x = torch.cat([base[:1].repeat(20, 1), base[1:]])  # 20 copies of one token + 3 distinct
    r = reduce_tokens(x, (1, 1, 23), ReductionConfig("divprune", 4 / 23))
    assert set(r.index.tolist()) >= {20, 21, 22}


def test_dart_drops_duplicates_of_pivots():
    base = _tokens(8, 16, seed=2) * torch.linspace(1, 2, 8).unsqueeze(1)
    dupes = base[-1:] * 0.5 + 1e-3 * _tokens(8, 16, seed=3)  # near-copies of the largest token
    x = torch.cat([base, dupes])
    r = reduce_tokens(x, (1, 1, 16), ReductionConfig("dart", 0.5, dart_pivots=1))
    assert 7 in r.index.tolist() and not set(r.index.tolist()) & set(range(8, 16))


def test_visionzip_contextual_tokens_are_group_means():
    x = _tokens(40)
    r = reduce_tokens(x, (1, 5, 8), ReductionConfig("visionzip", 0.25, visionzip_contextual=0.5))
    assert r.embeds.shape[0] == 10
    kept_as_is = sum(any(torch.equal(e, row) for row in x) for e in r.embeds)
    assert kept_as_is == 5  # 5 dominant tokens unchanged, 5 merged contextual tokens


@pytest.mark.parametrize("method", reduction_names("after_tower") + ["fastv"])
def test_each_method_generates_with_fewer_tokens(vlm, image, method):
    red = ReductionConfig(method, 0.25, fastv_layer=1)
    r = vlm.generate([image], "What is this?", max_new_tokens=4, reduction=red)
    assert 1 <= len(r.token_ids) <= 4
    n = r.bill.unreduced_visual_tokens
    if method == "pool":  # grid 5x7 merged tokens -> round(5/2) x round(7/2) bins
        assert r.bill.visual_tokens == 2 * 4
    else:
        assert r.bill.visual_tokens == keep_count(n, 0.25)
    assert r.bill.prefill_flops < r.bill.unreduced_prefill_flops


@pytest.mark.parametrize("method", reduction_names("after_tower"))
def test_kept_tokens_keep_original_positions(vlm, image, method):
    b = vlm.backend
    prefix, _ = b.layout.first_turn(1, None, "q")
    red = ReductionConfig(method, 0.25)
    a = b.engine.assemble([image], prefix, red)
    pre = b.runtime.build_prefix(prefix, b.runtime.preprocess([image.to_pil()]))
    n_img = int((a.ids == b.family.image_token_id).sum())
    assert a.embeds.shape[0] == a.ids.numel() and n_img < a.unreduced
    # every kept column is a column of the full position table, in order, and the text after
    # the image continues where the unpruned prompt continues
    full = pre.positions.T.tolist()
    cols = [tuple(c) for c in a.positions.T.tolist()]
    it = iter(map(tuple, full))
    assert all(any(c == f for f in it) for c in cols)
    assert a.next_pos == int(pre.positions.max()) + 1
    assert cols[-1] == tuple(full[-1])


def test_config_errors():
    with pytest.raises(InputError, match="did you mean 'divprune'"):
        ReductionConfig("divprun", 0.5)
    with pytest.raises(InputError, match="keep_ratio"):
        ReductionConfig("pool", 0.0)
    with pytest.raises(InputError, match="keeps every token"):
        ReductionConfig("none", 0.5)
    assert ReductionConfig("pool", 1.0).cache_key() == ReductionConfig().cache_key()
    assert ReductionConfig("fastv", 0.5).question_dependent


def _divprune_one_row_at_a_time(x: torch.Tensor, k: int) -> list[int]:
    """The plain greedy max-min loop (one matrix-vector product per pick): the spec."""
    u = torch.nn.functional.normalize(x.float(), dim=-1, eps=1e-8)
    mean = torch.nn.functional.normalize(x.float().mean(0, keepdim=True), dim=-1, eps=1e-8)
    chosen = [int((u @ mean.T).squeeze(1).argmin())]
    min_dist = 1.0 - u @ u[chosen[0]]
    min_dist[chosen] = -1.0
    for _ in range(k - 1):
        chosen.append(int(min_dist.argmax()))
        min_dist = torch.minimum(min_dist, 1.0 - u @ u[chosen[-1]])
        min_dist[chosen] = -1.0
    return sorted(chosen)


def _image_like(n: int, d: int, seed: int) -> torch.Tensor:
    """Spatially smooth tokens with flat regions (exact duplicates), like a photo's patches."""
    g = torch.Generator().manual_seed(seed)
    side = int(n**0.5)
    coarse = torch.randn(1, d, side // 8, side // 8, generator=g)
    x = torch.nn.functional.interpolate(coarse, size=(side, side), mode="nearest")[0]
    x = x.permute(1, 2, 0).reshape(-1, d)
    noisy = torch.rand(x.shape[0], generator=g) < 0.5  # half the tokens exact copies
    return torch.where(noisy[:, None], x + 0.2 * torch.randn(x.shape, generator=g), x)


@pytest.mark.parametrize(
    "n, d, k, data",
    [
        (48, 16, 12, "random"),
        (300, 64, 75, "random"),
        (1024, 128, 256, "random"),
        (1024, 128, 102, "image"),
        (256, 32, 100, "image"),
        (37, 8, 36, "random"),
    ],
)
def test_divprune_keeps_the_tokens_of_the_one_row_greedy(n, d, k, data, monkeypatch):
    from cascade.vlm.reduction import divprune

    x = (
        torch.randn(n, d, generator=torch.Generator().manual_seed(n))
        if data == "random"
        else _image_like(n, d, seed=k)
    )
    expected = _divprune_one_row_at_a_time(x, k)
    assert divprune.farthest_points(x, k).tolist() == expected
    # a tiny pool ends rounds after a pick or two: many rounds, same picks
    monkeypatch.setattr(divprune, "POOL", 3)
    assert divprune.farthest_points(x, k).tolist() == expected


def test_divprune_past_the_distinct_tokens_keeps_every_distinct_one():
    # Once only exact copies of kept tokens remain, their distances are rounding noise around 0
    # and the order among them is arbitrary (in the one-row greedy too); what must hold is that
    # every distinct token is kept.
    from cascade.vlm.reduction import divprune

    x = _image_like(256, 32, seed=3)
    distinct = {tuple(row) for row in x.tolist()}
    kept = {tuple(x[i].tolist()) for i in divprune.farthest_points(x, 200).tolist()}
    assert len(distinct) < 200 and kept == distinct


@pytest.mark.parametrize(
    "grid, ratio", [((1, 6, 8), 0.25), ((2, 5, 7), 0.25), ((1, 9, 4), 0.1), ((3, 4, 4), 0.5)]
)
def test_pool_takes_each_bin_centre_position(grid, ratio):
    import math

    t, h, w = grid
    r = reduce_tokens(_tokens(t * h * w), grid, ReductionConfig("pool", ratio))
    oh, ow = max(1, round(h * math.sqrt(ratio))), max(1, round(w * math.sqrt(ratio)))
    rows = [(math.floor(i * h / oh) + math.ceil((i + 1) * h / oh) - 1) // 2 for i in range(oh)]
    cols = [(math.floor(j * w / ow) + math.ceil((j + 1) * w / ow) - 1) // 2 for j in range(ow)]
    assert r.index.tolist() == [f * h * w + i * w + j for f in range(t) for i in rows for j in cols]
