import pytest
import torch

from cascade.kernels.topk import reference, similarity_topk

from ._kernel_helpers import DEVICE, assert_close_first_mismatch, gpu, needs_gpu, poisoned


def _data(nq, n, d, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(nq, d, generator=g), torch.randn(n, d, generator=g)
    return q.to(dtype).to(DEVICE), k.to(dtype).to(DEVICE)


def _assert_same_topk(got, exp, atol=1e-5):
    (gs, gi), (es, ei) = got, exp
    assert_close_first_mismatch(gs, es, 1e-5, atol, what="scores")
    # indices must agree wherever the score is not tied with a neighbour in the ranking
    gap = torch.full_like(es, float("inf"))
    gap[:, 1:] = (es[:, 1:] - es[:, :-1]).abs()
    gap[:, :-1] = torch.minimum(gap[:, :-1], (es[:, :-1] - es[:, 1:]).abs())
    distinct = gap > 10 * atol
    assert_close_first_mismatch(
        torch.where(distinct, gi, -1), torch.where(distinct, ei, -1), what="index"
    )


# block 32 over N=100: four blocks, a tail of 4; k=40 > block; k=N; default block (128) > N;
# Q=17: two query blocks; D=40 and 70: a tail in the D loop (BLOCK_D=64).
@pytest.mark.slow
@pytest.mark.parametrize(
    "nq, n, d, k, block_n",
    [(3, 100, 40, 5, 32), (3, 100, 40, 40, 32), (2, 100, 70, 100, 32), (17, 50, 20, 3, 128)],
)
def test_triton_matches_reference(nq, n, d, k, block_n):
    from cascade.kernels.topk import triton as kernel

    q, keys = _data(nq, n, d)
    blocks, kc = -(-n // block_n), min(k, block_n)
    cands = (poisoned((nq, blocks * kc), torch.float32), poisoned((nq, blocks * kc), torch.int64))
    got = kernel.similarity_topk(
        q, keys, k, True, reference.EPS, block_n=block_n, out_candidates=cands
    )
    assert not cands[0].isnan().any(), "a candidate slot was never written"
    _assert_same_topk(got, reference.similarity_topk(q, keys, k, True))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs_and_raw_dot(dtype):
    q, keys = _data(2, 60, 24, dtype)
    for normalize in (True, False):
        got = similarity_topk(q, keys, 6, normalize=normalize, impl="triton")
        _assert_same_topk(
            got, similarity_topk(q, keys, 6, normalize=normalize, impl="torch"), atol=1e-4
        )


@pytest.mark.slow
def test_ties_keep_equal_scores():
    q, keys = _data(1, 40, 16)
    keys[10:20] = keys[3]  # eleven identical keys
    q[0] = keys[3]
    s, i = similarity_topk(q, keys, 5, impl="triton")
    assert_close_first_mismatch(s, torch.ones_like(s), 1e-5, 1e-5, what="tied scores")
    assert set(i[0].tolist()) <= {3, *range(10, 20)}


@pytest.mark.parametrize(
    "args, error",
    [
        ((torch.zeros(2, 8), torch.zeros(5, 8), 6), ValueError),
        ((torch.zeros(2, 8), torch.zeros(5, 8), 0), ValueError),
        ((torch.zeros(2, 8), torch.zeros(5, 7), 1), ValueError),
        ((torch.zeros(8), torch.zeros(5, 8), 1), ValueError),
        ((torch.zeros(2, 8), torch.zeros(5, 8, dtype=torch.float16), 1), TypeError),
        (
            (torch.zeros(2, 8, dtype=torch.int32), torch.zeros(5, 8, dtype=torch.int32), 1),
            TypeError,
        ),
    ],
)
def test_bad_input_is_a_clear_error(args, error):
    with pytest.raises(error):
        similarity_topk(*args)


@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_realistic(dtype):
    needs_gpu()
    q = torch.randn(8, 512, device="cuda", dtype=dtype)
    keys = torch.randn(100_003, 512, device="cuda", dtype=dtype)
    _assert_same_topk(
        similarity_topk(q, keys, 10, impl="triton"),
        similarity_topk(q, keys, 10, impl="torch"),
        atol=1e-5,
    )
