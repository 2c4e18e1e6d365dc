"""4-bit KV storage (KIVI: keys per channel, values per token, groups of G, the most recent tokens
kept in full precision) and decode attention that reads it directly (reference.py: the layout and
the error bound).

`quantize_kv_int4` runs once per stored block (torch: it is off the decode path);
`int4_attention(q, kv, impl=)` is the op with a Triton kernel: one decode step's attention with the
dequantization fused in, so the fp KV never exists in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..impl import choose_impl
from . import reference

DEFAULT_GROUP_SIZE = 64
DEFAULT_RESIDUAL = 32


@dataclass(frozen=True)
class Int4KV:
    """One layer's 4-bit KV (reference.py): packed codes, float16 scales and minima, and the
    residual tokens in `dtype`."""

    k_packed: torch.Tensor  # uint8 [B, H, n_q, D/2]
    k_scale: torch.Tensor  # float16 [B, H, n_q/G, D]
    k_min: torch.Tensor
    v_packed: torch.Tensor  # uint8 [B, H, n_q, D/2]
    v_scale: torch.Tensor  # float16 [B, H, n_q, D/Gv]
    v_min: torch.Tensor
    k_res: torch.Tensor  # [B, H, seq - n_q, D] in the KV's dtype
    v_res: torch.Tensor
    group_size: int

    @property
    def parts(self) -> reference.Parts:
        return (
            self.k_packed,
            self.k_scale,
            self.k_min,
            self.v_packed,
            self.v_scale,
            self.v_min,
            self.k_res,
            self.v_res,
        )

    @property
    def seq_len(self) -> int:
        return self.k_packed.shape[2] + self.k_res.shape[2]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.parts)


def quantize_kv_int4(
    k: torch.Tensor,
    v: torch.Tensor,
    group_size: int = DEFAULT_GROUP_SIZE,
    residual: int = DEFAULT_RESIDUAL,
) -> Int4KV:
    """One layer's k, v [batch, heads, seq, head_dim] -> `Int4KV`."""
    reference.validate(k, v, group_size, residual)
    return Int4KV(*reference.quantize(k, v, group_size, residual), group_size=group_size)


def dequantize_kv_int4(kv: Int4KV) -> tuple[torch.Tensor, torch.Tensor]:
    """(k, v) [batch, heads, seq, head_dim] in the stored KV's dtype."""
    if not isinstance(kv, Int4KV):
        raise TypeError(f"dequantize_kv_int4 expects an Int4KV, got {type(kv).__name__}")
    return reference.dequantize(kv.parts, kv.group_size)


def int4_attention(
    q: torch.Tensor, kv: Int4KV, scale: float | None = None, impl: str = "auto"
) -> torch.Tensor:
    """One decode step: q [batch, q_heads, head_dim] attends to every token of `kv` (GQA: q_heads a
    multiple of its heads); scale defaults to head_dim ** -0.5. [batch, q_heads, head_dim]."""
    if q.ndim != 3 or q.shape[0] != kv.k_res.shape[0] or q.shape[2] != kv.k_res.shape[3]:
        raise ValueError(
            f"q must be [batch, q_heads, head_dim] matching the KV's batch and head_dim; got "
            f"q {tuple(q.shape)}, KV residual {tuple(kv.k_res.shape)}"
        )
    if q.shape[1] % kv.k_res.shape[1]:
        raise ValueError(f"{q.shape[1]} query heads for {kv.k_res.shape[1]} KV heads")
    if kv.seq_len == 0:
        raise ValueError("the KV holds no token to attend to")
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    if choose_impl(impl, q, *kv.parts) == "triton":
        from . import triton as kernel

        return kernel.attention(q, kv.parts, kv.group_size, scale)
    return reference.attention(q, kv.parts, kv.group_size, scale)


__all__ = [
    "DEFAULT_GROUP_SIZE",
    "DEFAULT_RESIDUAL",
    "Int4KV",
    "dequantize_kv_int4",
    "int4_attention",
    "quantize_kv_int4",
]
