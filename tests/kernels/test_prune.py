import pytest
import torch

from cascade.kernels.prune import METHODS, reference, score_and_gather

from ._kernel_helpers import (
    DEVICE,
    FLOAT_DTYPES,
    TOL,
    assert_close_first_mismatch,
    gpu,
    needs_gpu,
    poisoned,
)


def _tokens(n, d, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g).to(dtype).to(DEVICE)


# 37x200: three row blocks with a tail and two column blocks with a tail; 16x128: exact blocks;
# 1x8: no neighbours at all (duplicate scores are +inf).
# every dtype on the multi-block shape, float32 on the others (interpreter time)
@pytest.mark.parametrize(
    "n, d, dtype",
    [(37, 200, dt) for dt in FLOAT_DTYPES] + [(16, 128, torch.float32), (1, 8, torch.float32)],
)
@pytest.mark.parametrize("method", METHODS)
def test_triton_scores_match_reference(n, d, dtype, method):
    from cascade.kernels.prune import triton as kernel

    x = _tokens(n, d, dtype)
    out = poisoned((n,), torch.float32)
    got = kernel.keep_scores(x, method, reference.EPS, out=out)
    rtol, atol = TOL[torch.float32]  # both accumulate in float32 from the same inputs
    assert_close_first_mismatch(
        got, reference.keep_scores(x, method), rtol * 10, atol * 10, what=f"{method} scores"
    )


# 600 rows: three 256-row partial sums (the last a tail); with 16-row partials, 38 of them, so
# the finishing program loops over three blocks of partial rows, the last a tail.
@pytest.mark.slow
@pytest.mark.parametrize("rows_per_partial", [256, 16])
def test_column_sum_across_programs(rows_per_partial, monkeypatch):
    from cascade.kernels.prune import triton as kernel

    monkeypatch.setattr(kernel, "ROWS_PER_PARTIAL", rows_per_partial)
    x = _tokens(600, 200, torch.float16)
    got = kernel.column_sum(x, poisoned((200,), torch.float32))
    assert_close_first_mismatch(got, x.float().sum(0), 1e-5, 1e-4, what="column sum")
    assert torch.equal(
        kernel.column_sum(x, torch.empty(200, device=DEVICE)), got
    )  # fixed order: same bits


@pytest.mark.parametrize("method", METHODS)
def test_triton_selection_and_gather_match_reference(method):
    x = _tokens(40, 72, torch.float16)
    got, got_idx = score_and_gather(x, 13, method, impl="triton")
    exp, exp_idx = score_and_gather(x, 13, method, impl="torch")
    assert_close_first_mismatch(got_idx, exp_idx, what="kept_index")
    assert_close_first_mismatch(got, exp, what="kept_tokens")
    assert bool((got_idx[1:] > got_idx[:-1]).all()), "kept_index must be ascending"


def test_triton_gather_writes_every_row():
    from cascade.kernels.prune import triton as kernel

    x = _tokens(30, 150)  # 150 columns: two column blocks, the second with a tail
    idx = torch.tensor([0, 3, 29, 17], device=DEVICE)
    out = kernel.gather(x, idx, out=poisoned((4, 150), torch.float32))
    assert_close_first_mismatch(out, x[idx], what="gathered rows")


def test_strided_rows():
    big = _tokens(50, 64)
    x = big[::2]  # row stride 128: the kernels must honour it
    got, got_idx = score_and_gather(x, 7, "duplicate", impl="triton")
    exp, exp_idx = score_and_gather(x.contiguous(), 7, "duplicate", impl="torch")
    assert_close_first_mismatch(got_idx, exp_idx, what="kept_index")
    assert_close_first_mismatch(got, exp, what="kept_tokens")


@pytest.mark.parametrize("impl", ["torch", "triton"])
def test_keep_all_returns_tokens_unchanged(impl):
    x = _tokens(9, 16)
    kept, idx = score_and_gather(x, 9, "dominant", impl=impl)
    assert kept is x
    assert idx.tolist() == list(range(9))


def test_keep_none_is_empty():
    kept, idx = score_and_gather(_tokens(9, 16), 0, "duplicate")
    assert kept.shape == (0, 16) and idx.numel() == 0


@pytest.mark.parametrize("impl", ["torch", "triton"])
def test_scores_mean_what_they_say(impl):
    x = _tokens(12, 32)
    x[5] = x[4]  # an exact duplicate pair: "duplicate" drops them first
    _, idx = score_and_gather(x, 10, "duplicate", impl=impl)
    assert 4 not in idx.tolist() and 5 not in idx.tolist()
    y = torch.ones(12, 32, device=DEVICE) + 0.01 * _tokens(12, 32, seed=1)
    y[7] = -y[7]  # the one token pointing away from the mean: "dominant" keeps it
    _, idx = score_and_gather(y, 1, "dominant", impl=impl)
    assert idx.tolist() == [7]


@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(tokens=torch.zeros(4, 8), keep=5), ValueError),
        (dict(tokens=torch.zeros(4, 8), keep=-1), ValueError),
        (dict(tokens=torch.zeros(4, 8), keep=2, method="random"), ValueError),
        (dict(tokens=torch.zeros(2, 4, 8), keep=2), ValueError),
        (dict(tokens=torch.zeros(4, 8, dtype=torch.int32), keep=2), TypeError),
    ],
)
def test_bad_input_is_a_clear_error(kwargs, error):
    with pytest.raises(error):
        score_and_gather(**kwargs)


@gpu
@pytest.mark.parametrize("method", METHODS)
def test_gpu_realistic(method):
    needs_gpu()
    x = torch.randn(2880, 1536, device="cuda", dtype=torch.bfloat16)
    from cascade.kernels.prune import triton as kernel

    assert_close_first_mismatch(
        kernel.keep_scores(x, method, reference.EPS),
        reference.keep_scores(x, method),
        1e-4,
        1e-5,
        what="scores",
    )
    got, got_idx = score_and_gather(x, 720, method, impl="triton")
    assert_close_first_mismatch(got, x[got_idx], what="gather")
