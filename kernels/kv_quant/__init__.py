"""int8 KV-cache storage: keys per-channel, values per-token (see reference.py for the spec)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .._dispatch import choose_impl
from . import reference


@dataclass(frozen=True)
class QuantizedKV:
    """int8 keys/values of shape [batch, heads, seq, head_dim] with float32 scales."""

    k: torch.Tensor        # int8
    v: torch.Tensor        # int8
    k_scale: torch.Tensor  # float32 [batch, heads, head_dim]
    v_scale: torch.Tensor  # float32 [batch, heads, seq]
    dtype: torch.dtype     # of the original k and v

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.k, self.v, self.k_scale, self.v_scale))


def quantize_kv(k: torch.Tensor, v: torch.Tensor, impl: str = "auto") -> QuantizedKV:
    reference.validate(k, v)
    if choose_impl(impl, k, v) == "triton":
        from . import triton as kernel
        parts = kernel.quantize(k, v)
    else:
        parts = reference.quantize(k, v)
    return QuantizedKV(*parts, dtype=k.dtype)


def dequantize_kv(q: QuantizedKV, impl: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(q, QuantizedKV):
        raise TypeError(f"dequantize_kv expects a QuantizedKV, got {type(q).__name__}")
    parts = (q.k, q.v, q.k_scale, q.v_scale)
    if choose_impl(impl, *parts) == "triton":
        from . import triton as kernel
        return kernel.dequantize(*parts, q.dtype)
    return reference.dequantize(*parts, q.dtype)


__all__ = ["QuantizedKV", "dequantize_kv", "quantize_kv"]
