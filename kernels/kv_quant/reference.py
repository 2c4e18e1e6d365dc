"""Torch reference for int8 KV-cache quantization: the spec and the CPU path.

Keys are quantized per channel (one scale per (batch, head, head_dim), over seq) because key
outliers live in fixed channels; values per token (one scale per (batch, head, seq)), as in KIVI.
Symmetric int8 in [-127, 127]; round half away from zero; an all-zero slice gets scale 0 and
dequantizes to exact zeros. |x - deq(q(x))| <= scale / 2 up to float32 rounding.
"""
from __future__ import annotations

import torch

from .._dispatch import check_float


def validate(k: torch.Tensor, v: torch.Tensor) -> None:
    check_float("k", k)
    if k.ndim != 4 or k.shape != v.shape or k.dtype != v.dtype:
        raise ValueError(f"k and v must be [batch, heads, seq, head_dim] of the same shape and "
                         f"dtype; got k {tuple(k.shape)} {k.dtype}, v {tuple(v.shape)} {v.dtype}")


def _quantize(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.float()
    scale = x.abs().amax(dim) / 127.0
    s = scale.unsqueeze(dim)
    y = torch.where(s > 0, x / torch.where(s > 0, s, 1.0), 0.0)
    q = torch.where(y >= 0, torch.floor(y + 0.5), torch.ceil(y - 0.5))
    return q.clamp(-127, 127).to(torch.int8), scale


def quantize(k: torch.Tensor, v: torch.Tensor):
    """Return (k_q, v_q, k_scale [B,H,Dh] fp32, v_scale [B,H,S] fp32)."""
    k_q, k_scale = _quantize(k, 2)
    v_q, v_scale = _quantize(v, 3)
    return k_q, v_q, k_scale, v_scale


def dequantize(k_q, v_q, k_scale, v_scale, dtype: torch.dtype):
    k = (k_q.float() * k_scale.unsqueeze(2)).to(dtype)
    v = (v_q.float() * v_scale.unsqueeze(3)).to(dtype)
    return k, v
