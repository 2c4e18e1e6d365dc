"""Torch reference for 4-bit KV storage (KIVI) and decode attention over it: the spec, and the CPU
path.

Layout of one layer's k, v [batch, heads, seq, head_dim] with group size G and R recent tokens:

- the first `n_q = max(0, (seq - R) // G * G)` tokens are quantized, the rest (the most recent R to
  R + G - 1) stay in the KV's own dtype (`k_res`, `v_res`): new tokens are still being attended
  to closely, and a key group needs G tokens before its per-channel range is known;
- keys per channel over groups of G tokens (KIVI: key outliers live in fixed channels): scale and
  minimum [batch, heads, n_q / G, head_dim];
- values per token over groups of Gv = min(G, head_dim) channels: [batch, heads, n_q,
  head_dim / Gv];
- asymmetric 4-bit codes 0..15, two per byte along head_dim (even index in the low nibble);
- scales and minima are float16, the minimum rounded down and the scale up, so every value of a
  group lies in [min, min + 15 * scale] and no code is clamped: |x - deq(q(x))| <= scale / 2
  (+ float32 rounding of the division, ~2^-20 relative).

Bytes per quantized element: 0.5 + 4 / G (keys) and 0.5 + 4 / Gv (values), against 2 for bf16:
G = 64 gives 0.281x of bf16, G = 128 0.266x, G = 32 0.313x (residual tokens extra).
"""

from __future__ import annotations

import torch

from ..impl import check_float


def value_group(group_size: int, head_dim: int) -> int:
    return min(group_size, head_dim)


def validate(k: torch.Tensor, v: torch.Tensor, group_size: int, residual: int) -> None:
    for name, t in (("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
        check_float(name, t)
    if k.ndim != 4 or k.shape != v.shape or k.dtype != v.dtype or k.device != v.device:
        raise ValueError(
            f"k and v must be [batch, heads, seq, head_dim] of one shape, dtype and device; got "
            f"k {tuple(k.shape)} {k.dtype}, v {tuple(v.shape)} {v.dtype}"
        )
    dh = k.shape[-1]
    if group_size < 2 or group_size & (group_size - 1):
        raise ValueError(f"group_size must be a power of two >= 2, got {group_size}")
    if dh % 2 or dh % value_group(group_size, dh):
        raise ValueError(
            f"head_dim {dh} must be even and divisible by the value group "
            f"{value_group(group_size, dh)} (min(group_size, head_dim))"
        )
    if residual < 0:
        raise ValueError(f"residual must be >= 0, got {residual}")


def quantized_tokens(seq: int, group_size: int, residual: int) -> int:
    return max(0, (seq - residual) // group_size * group_size)


def _down16(x: torch.Tensor) -> torch.Tensor:
    """float32 -> the largest float16 <= x."""
    h = x.half()
    return torch.where(h.float() > x, torch.nextafter(h, torch.full_like(h, -float("inf"))), h)


def _up16(x: torch.Tensor) -> torch.Tensor:
    """float32 -> the smallest float16 >= x."""
    h = x.half()
    return torch.where(h.float() < x, torch.nextafter(h, torch.full_like(h, float("inf"))), h)


def _codes(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x grouped along `dim` (the group axis, reduced) -> (codes 0..15 float32 like x, scale, min
    float16 with `dim` reduced)."""
    x = x.float()
    mn = _down16(x.amin(dim))
    span = x.amax(dim) - mn.float()
    scale = _up16(span / 15.0)
    s = scale.float().unsqueeze(dim)
    q = torch.where(
        s > 0, torch.floor((x - mn.float().unsqueeze(dim)) / torch.where(s > 0, s, 1.0) + 0.5), 0.0
    )
    return q.clamp(0, 15), scale, mn


def _pack(q: torch.Tensor) -> torch.Tensor:
    q = q.to(torch.uint8)
    return q[..., 0::2] | (q[..., 1::2] << 4)


def _unpack(p: torch.Tensor) -> torch.Tensor:
    lo, hi = p & 15, p >> 4
    return torch.stack((lo, hi), dim=-1).flatten(-2)


Parts = tuple[
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
]
"""(k_packed, k_scale, k_min, v_packed, v_scale, v_min, k_res, v_res) of one layer."""


def quantize(k: torch.Tensor, v: torch.Tensor, group_size: int, residual: int) -> Parts:
    """One layer's `Parts`."""
    b, h, s, dh = k.shape
    n = quantized_tokens(s, group_size, residual)
    gv = value_group(group_size, dh)
    kq, ks, km = _codes(k[:, :, :n].reshape(b, h, n // group_size, group_size, dh), 3)
    vq, vs, vm = _codes(v[:, :, :n].reshape(b, h, n, dh // gv, gv), 4)
    return (
        _pack(kq.reshape(b, h, n, dh)),
        ks,
        km,
        _pack(vq.reshape(b, h, n, dh)),
        vs,
        vm,
        k[:, :, n:].clone(),
        v[:, :, n:].clone(),
    )


def dequantize(parts: Parts, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(k, v) [batch, heads, seq, head_dim] in the residual's dtype."""
    k_packed, k_scale, k_min, v_packed, v_scale, v_min, k_res, v_res = parts
    b, h, n, half = k_packed.shape
    dh, gv = 2 * half, value_group(group_size, 2 * half)
    kq = _unpack(k_packed).float().reshape(b, h, n // group_size, group_size, dh)
    k = kq * k_scale.float().unsqueeze(3) + k_min.float().unsqueeze(3)
    vq = _unpack(v_packed).float().reshape(b, h, n, dh // gv, gv)
    v = vq * v_scale.float().unsqueeze(4) + v_min.float().unsqueeze(4)
    k = torch.cat([k.reshape(b, h, n, dh).to(k_res.dtype), k_res], dim=2)
    v = torch.cat([v.reshape(b, h, n, dh).to(v_res.dtype), v_res], dim=2)
    return k, v


def attention(q: torch.Tensor, parts: Parts, group_size: int, scale: float) -> torch.Tensor:
    """Decode attention of q [batch, q_heads, head_dim] (one new token per row, attending to every
    stored token) over the 4-bit KV `parts` (as `quantize` returns them); GQA when q_heads is a
    multiple of the KV heads. Returns [batch, q_heads, head_dim] in q's dtype; float32 inside."""
    k, v = dequantize(parts, group_size)
    rep = q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(rep, dim=1)
    v = v.float().repeat_interleave(rep, dim=1)
    w = torch.softmax((q.float().unsqueeze(2) @ k.transpose(-1, -2)) * scale, dim=-1)
    return (w @ v).squeeze(2).to(q.dtype)
