import dataclasses

import pytest
import torch

from cascade.kernels.kv_quant import dequantize_kv, quantize_kv

from ._kernel_helpers import (
    DEVICE,
    FLOAT_DTYPES,
    TOL,
    assert_close_first_mismatch,
    gpu,
    needs_gpu,
    poisoned,
)


def _kv(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    k = (
        torch.randn(*shape, generator=g) * torch.rand(shape[-1], generator=g) * 4
    )  # channel outliers
    v = torch.randn(*shape, generator=g)
    return k.to(dtype).to(DEVICE), v.to(dtype).to(DEVICE)


def _check_bound(x: torch.Tensor, q_int: torch.Tensor, scale: torch.Tensor, what: str):
    err = (x.float() - q_int.float() * scale).abs()
    # scale/2 from rounding, plus float32 rounding of x/scale (|x/scale| <= 127, so ~127 * 2^-24)
    bound = (scale * (0.5 + 2e-5)).expand_as(err)
    worst = (err - bound).flatten().argmax()
    assert bool((err <= bound).all()), (
        f"{what}: error {err.flatten()[worst].item()} > {bound.flatten()[worst].item()} at flat "
        f"index {worst.item()}"
    )


def _layers(n, shape, dtype):
    pairs = [_kv(shape, dtype, seed=i) for i in range(n)]
    return [k for k, _ in pairs], [v for _, v in pairs]


# (2, 3, 37, 24): seq and head_dim tails in one seq block; (1, 1, 1, 1): degenerate;
# (1, 2, 70, 128): three seq blocks of 32 (the last a tail), so key maxima cross programs.
# layers: 1 (a plain tensor) and 3 (a list: one launch over layers x heads x seq blocks).
@pytest.mark.slow
@pytest.mark.parametrize("shape", [(2, 3, 37, 24), (1, 1, 1, 1), (1, 2, 70, 128)])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("n_layers", [None, 3])
def test_triton_matches_reference(shape, dtype, n_layers):
    if n_layers is None:
        k, v = _kv(shape, dtype)
        lead = ()
    else:
        k, v = _layers(n_layers, shape, dtype)
        lead = (n_layers,)
    got, exp = quantize_kv(k, v, impl="triton"), quantize_kv(k, v, impl="torch")
    assert got.k.shape == (*lead, *shape) and got.k_scale.shape == (*lead, *shape[:2], shape[3])
    for name in ("k", "v", "k_scale", "v_scale"):  # same float32 ops: bit-identical
        assert_close_first_mismatch(getattr(got, name), getattr(exp, name), what=name)
    ks, vs = ([k], [v]) if n_layers is None else (k, v)
    for i, (kk, vv) in enumerate(zip(ks, vs, strict=True)):
        at = (i,) if lead else ()
        _check_bound(kk, got.k[at], got.k_scale[at].unsqueeze(2), f"keys of layer {i}")
        _check_bound(vv, got.v[at], got.v_scale[at].unsqueeze(3), f"values of layer {i}")
    from cascade.kernels.kv_quant import triton as kernel

    out_k, out_v = poisoned(got.k.shape, dtype), poisoned(got.k.shape, dtype)
    dk, dv = kernel.dequantize(got.k, got.v, got.k_scale, got.v_scale, dtype, out_k, out_v)
    rk, rv = dequantize_kv(exp, impl="torch")
    rtol, atol = (0.0, 0.0) if dtype != torch.bfloat16 else TOL[dtype]  # interpreter bf16 rounding
    assert_close_first_mismatch(dk, rk, rtol, atol, what="dequantized k")
    assert_close_first_mismatch(dv, rv, rtol, atol, what="dequantized v")


def test_strided_hf_layout():
    k, v = _kv((2, 11, 3, 16), torch.float16)  # [batch, seq, heads, dim] viewed as [b, h, s, d]
    k, v = k.transpose(1, 2), v.transpose(1, 2)
    got, exp = (
        quantize_kv(k, v, impl="triton"),
        quantize_kv(k.contiguous(), v.contiguous(), impl="torch"),
    )
    assert_close_first_mismatch(got.k, exp.k, what="k")
    assert_close_first_mismatch(got.v, exp.v, what="v")


def test_layers_with_different_layouts():
    (k0, k1), (v0, v1) = _layers(2, (1, 2, 9, 16), torch.float32)
    k1 = k1.transpose(1, 2).contiguous().transpose(1, 2)  # same values, other strides
    got = quantize_kv([k0, k1], [v0, v1], impl="triton")
    exp = quantize_kv([k0, k1.contiguous()], [v0, v1], impl="torch")
    for name in ("k", "v", "k_scale", "v_scale"):
        assert_close_first_mismatch(getattr(got, name), getattr(exp, name), what=name)


@pytest.mark.parametrize("impl", ["torch", "triton"])
def test_zero_slices_roundtrip_exactly(impl):
    k, v = _kv((1, 2, 6, 8), torch.float32)
    k[:, :, :, 3] = 0  # a dead key channel
    v[:, :, 2, :] = 0  # a zero value token
    q = quantize_kv(k, v, impl=impl)
    assert bool((q.k_scale[:, :, 3] == 0).all()) and bool((q.v_scale[:, :, 2] == 0).all())
    dk, dv = dequantize_kv(q, impl=impl)
    assert bool((dk[:, :, :, 3] == 0).all()) and bool((dv[:, :, 2] == 0).all())
    assert not dk.isnan().any() and not dv.isnan().any()


def test_quantized_kv_record():
    k, v = _kv((2, 4, 50, 64), torch.float16)
    q = quantize_kv(k, v)
    assert q.dtype == torch.float16 and q.k.dtype == q.v.dtype == torch.int8
    assert q.nbytes == 2 * k.numel() + 4 * (2 * 4 * 64 + 2 * 4 * 50)
    assert q.nbytes < 2 * (k.numel() * 2) * 0.6  # int8 + scales: ~half of fp16
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.k = q.v
    dk, dv = dequantize_kv(q)
    assert dk.dtype == dv.dtype == torch.float16 and dk.shape == k.shape


@pytest.mark.parametrize(
    "k, v, error",
    [
        ([torch.zeros(1, 2, 3, 4)], torch.zeros(1, 2, 3, 4), TypeError),
        ([torch.zeros(1, 2, 3, 4)] * 2, [torch.zeros(1, 2, 3, 4)], ValueError),
        (
            [torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 5, 4)],
            [torch.zeros(1, 2, 3, 4)] * 2,
            ValueError,
        ),
        ([], [], ValueError),
        (torch.zeros(2, 3, 4), torch.zeros(2, 3, 4), ValueError),
        (torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 5), ValueError),
        (torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4, dtype=torch.float16), ValueError),
        (
            torch.zeros(1, 2, 3, 4, dtype=torch.int8),
            torch.zeros(1, 2, 3, 4, dtype=torch.int8),
            TypeError,
        ),
    ],
)
def test_bad_input_is_a_clear_error(k, v, error):
    with pytest.raises(error):
        quantize_kv(k, v)


def test_dequantize_needs_a_quantized_kv():
    with pytest.raises(TypeError):
        dequantize_kv((torch.zeros(1), torch.zeros(1)))


@gpu
def test_gpu_realistic():
    needs_gpu()
    # Qwen2-VL-2B's prefix cache: 28 layers of 2 KV heads, 4,096 tokens
    k = [torch.randn(1, 2, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(28)]
    v = [torch.randn_like(t) for t in k]
    got, exp = quantize_kv(k, v, impl="triton"), quantize_kv(k, v, impl="torch")
    for name in ("k_scale", "v_scale"):
        assert_close_first_mismatch(getattr(got, name), getattr(exp, name), what=name)
    for name in ("k", "v"):  # exact division on both sides; allow one step for safety
        diff = (getattr(got, name).int() - getattr(exp, name).int()).abs()
        assert int(diff.max()) <= 1, f"{name}: int8 codes differ by {int(diff.max())}"
    _check_bound(torch.stack(k), got.k, got.k_scale.unsqueeze(3), "keys")
    _check_bound(torch.stack(v), got.v, got.v_scale.unsqueeze(4), "values")
    dk, dv = dequantize_kv(got, impl="triton")
    rk, rv = dequantize_kv(got, impl="torch")
    assert_close_first_mismatch(dk, rk, what="k")
    assert_close_first_mismatch(dv, rv, what="v")
