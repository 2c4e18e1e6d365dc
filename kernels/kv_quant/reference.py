"""Torch reference for int8 KV-cache quantization: the spec and the CPU path.

Keys are quantized per channel (one scale per (layer, batch, head, head_dim), over seq) because key
outliers live in fixed channels; values per token (one scale per (layer, batch, head, seq)), as in
KIVI. Symmetric int8 in [-127, 127]; round half away from zero; an all-zero slice gets scale 0
and dequantizes to exact zeros. |x - deq(q(x))| <= scale / 2 up to float32 rounding.
"""

from __future__ import annotations

import torch

from ..impl import check_float


def validate(ks: list[torch.Tensor], vs: list[torch.Tensor]) -> None:
    """ks, vs: one [batch, heads, seq, head_dim] tensor per layer, all of one shape and dtype."""
    if not ks or len(ks) != len(vs):
        raise ValueError(
            f"need the same number (>= 1) of key and value tensors, got {len(ks)} and {len(vs)}"
        )
    for t in (*ks, *vs):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"keys and values must be tensors, got {type(t).__name__}")
    k0 = ks[0]
    check_float("k", k0)
    for i, (k, v) in enumerate(zip(ks, vs, strict=True)):
        if (
            k.ndim != 4
            or k.shape != k0.shape
            or v.shape != k0.shape
            or k.dtype != k0.dtype
            or v.dtype != k0.dtype
            or k.device != k0.device
            or v.device != k0.device
        ):
            raise ValueError(
                f"layer {i}: k and v must be [batch, heads, seq, head_dim] of one shape, dtype and "
                f"device across layers; got k {tuple(k.shape)} {k.dtype} {k.device}, v "
                f"{tuple(v.shape)} {v.dtype} {v.device}, layer 0 k {tuple(k0.shape)} {k0.dtype}"
            )


def _quantize(x: torch.Tensor, dim: int, q_out: torch.Tensor, scale_out: torch.Tensor) -> None:
    x = x.float()
    scale = x.abs().amax(dim) / 127.0
    s = scale.unsqueeze(dim)
    y = torch.where(s > 0, x / torch.where(s > 0, s, 1.0), 0.0)
    q = torch.where(y >= 0, torch.floor(y + 0.5), torch.ceil(y - 0.5))
    q_out.copy_(q.clamp(-127, 127))
    scale_out.copy_(scale)


def quantize(ks: list[torch.Tensor], vs: list[torch.Tensor]):
    """Return (k_q, v_q [L,B,H,S,Dh] int8, k_scale [L,B,H,Dh] fp32, v_scale [L,B,H,S] fp32)."""
    b, h, s, dh = ks[0].shape
    dev = ks[0].device
    k_q = torch.empty((len(ks), b, h, s, dh), dtype=torch.int8, device=dev)
    v_q = torch.empty_like(k_q)
    k_scale = torch.empty((len(ks), b, h, dh), dtype=torch.float32, device=dev)
    v_scale = torch.empty((len(ks), b, h, s), dtype=torch.float32, device=dev)
    for i, (k, v) in enumerate(zip(ks, vs, strict=True)):
        _quantize(k, 2, k_q[i], k_scale[i])
        _quantize(v, 3, v_q[i], v_scale[i])
    return k_q, v_q, k_scale, v_scale


def dequantize(k_q, v_q, k_scale, v_scale, dtype: torch.dtype):
    k = (k_q.float() * k_scale.unsqueeze(-2)).to(dtype)
    v = (v_q.float() * v_scale.unsqueeze(-1)).to(dtype)
    return k, v
