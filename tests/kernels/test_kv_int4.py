"""4-bit KV (KIVI layout): the round-trip bound per group size, the bytes against bf16, and the
fused decode-attention kernel against its torch reference (TRITON_INTERPRET=1 on CPU)."""

import pytest
import torch

from cascade.kernels.kv_int4 import (
    dequantize_kv_int4,
    int4_attention,
    quantize_kv_int4,
)

from ._kernel_helpers import DEVICE, assert_close_first_mismatch


def _kv(b, h, s, d, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(b, h, s, d, generator=g) * (torch.rand(d, generator=g) * 4 + 0.1)
    v = torch.randn(b, h, s, d, generator=g)
    return k.to(dtype).to(DEVICE), v.to(dtype).to(DEVICE)


@pytest.mark.parametrize("group", [8, 16, 32, 64])
def test_round_trip_error_is_within_half_a_step_of_each_group(group):
    """|x - deq(q(x))| <= scale / 2 per group (+ 2^-20 relative float32 rounding): the stated
    bound, for keys (groups of G tokens per channel) and values (groups of min(G, D) channels per
    token); the residual tokens come back exactly."""
    b, h, s, d, r = 1, 2, 3 * group + 5, 64, 4
    k, v = _kv(b, h, s, d)
    q = quantize_kv_int4(k, v, group, r)
    n = q.k_packed.shape[2]
    assert n == (s - r) // group * group and q.k_res.shape[2] == s - n
    k2, v2 = dequantize_kv_int4(q)
    assert torch.equal(k2[:, :, n:], k[:, :, n:]) and torch.equal(v2[:, :, n:], v[:, :, n:])
    ks = q.k_scale.float().repeat_interleave(group, dim=2)  # per token, per channel
    gv = min(group, d)
    vs = q.v_scale.float().repeat_interleave(gv, dim=3)
    k_err = (k2[:, :, :n] - k[:, :, :n]).abs()
    v_err = (v2[:, :, :n] - v[:, :, :n]).abs()
    slack = 2**-20 * 16
    assert bool((k_err <= ks * (0.5 + slack) + 1e-7).all()), (k_err - ks / 2).max()
    assert bool((v_err <= vs * (0.5 + slack) + 1e-7).all()), (v_err - vs / 2).max()
    # and the step itself is the group's range / 15 (rounded up to float16)
    assert float(k_err.max()) <= float((k.amax() - k.amin()) / 30 * 1.01)


def test_int4_is_under_0_30x_of_bf16_with_scales():
    """0.5 byte + 4/64 of scales per element, against 2 for bf16: 0.281x, plus 32 to 95 residual
    tokens in bf16 (+1.6 % of a 4k-token block)."""
    k, v = _kv(1, 4, 4096, 128, torch.bfloat16)
    q = quantize_kv_int4(k, v, group_size=64, residual=32)
    ratio = q.nbytes / (k.numel() * 2 * 2)
    assert ratio <= 0.30, ratio


def test_constant_and_zero_groups_dequantize_exactly():
    k = torch.zeros(1, 1, 32, 16)
    v = torch.full((1, 1, 32, 16), 0.5)
    q = quantize_kv_int4(k, v, 16, 0)
    k2, v2 = dequantize_kv_int4(q)
    assert torch.equal(k2, k) and torch.equal(v2, v)


def test_bad_layouts_are_refused():
    k, v = _kv(1, 1, 8, 16)
    with pytest.raises(ValueError, match="power of two"):
        quantize_kv_int4(k, v, group_size=12)
    with pytest.raises(ValueError, match="divisible"):
        quantize_kv_int4(*_kv(1, 1, 8, 20), group_size=8)
    with pytest.raises(ValueError, match="query heads"):
        int4_attention(torch.randn(1, 3, 16), quantize_kv_int4(*_kv(1, 2, 8, 16), 8, 0))


@pytest.mark.parametrize(
    "b, hq, hkv, s, d, group, residual, dtype",
    [
        (2, 4, 2, 3 * 16 + 21, 32, 16, 21, torch.float32),  # GQA, 3 key groups, residual tail
        (1, 2, 2, 2 * 8 + 70, 24, 8, 70, torch.float32),  # head_dim padded (24 -> 32), residual
        # over two of its blocks
        (1, 2, 1, 64, 16, 32, 0, torch.bfloat16),  # no residual
        (1, 2, 2, 10, 16, 16, 32, torch.float16),  # residual only
    ],
)
def test_triton_attention_equals_reference(b, hq, hkv, s, d, group, residual, dtype):
    k, v = _kv(b, hkv, s, d, dtype, seed=s)
    kv = quantize_kv_int4(k, v, group, residual)
    q = torch.randn(b, hq, d, generator=torch.Generator().manual_seed(1)).to(dtype).to(DEVICE)
    ref = int4_attention(q, kv, impl="torch")
    out = int4_attention(q, kv, impl="triton")
    tol = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1e-2)}
    assert_close_first_mismatch(out, ref, *tol[dtype], what="int4 attention")


def test_reference_attention_is_sdpa_on_the_dequantized_kv():
    k, v = _kv(1, 2, 40, 16)
    kv = quantize_kv_int4(k, v, 8, 4)
    q = torch.randn(1, 4, 16)
    k2, v2 = dequantize_kv_int4(kv)
    want = torch.nn.functional.scaled_dot_product_attention(
        q[:, :, None], k2.repeat_interleave(2, 1), v2.repeat_interleave(2, 1)
    )[:, :, 0]
    torch.testing.assert_close(int4_attention(q, kv, impl="torch"), want, rtol=1e-5, atol=1e-6)
