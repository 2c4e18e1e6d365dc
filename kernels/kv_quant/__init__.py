"""int8 KV-cache storage: keys per-channel, values per-token (see reference.py for the spec).

`quantize_kv` takes one layer's keys and values, or every layer's at once (lists): the Triton
path then quantizes all layers in the same launches instead of launching per layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..impl import choose_impl
from . import reference


@dataclass(frozen=True)
class QuantizedKV:
    """int8 keys/values [*layers, batch, heads, seq, head_dim] with float32 scales: k_scale
    [*layers, batch, heads, head_dim], v_scale [*layers, batch, heads, seq]. `layers` is () when
    one layer was quantized and (L,) when a list of L layers was."""

    k: torch.Tensor  # int8
    v: torch.Tensor  # int8
    k_scale: torch.Tensor  # float32
    v_scale: torch.Tensor  # float32
    dtype: torch.dtype  # of the original k and v

    @property
    def nbytes(self) -> int:
        return sum(
            t.numel() * t.element_size() for t in (self.k, self.v, self.k_scale, self.v_scale)
        )


def quantize_kv(
    k: torch.Tensor | Sequence[torch.Tensor],
    v: torch.Tensor | Sequence[torch.Tensor],
    impl: str = "auto",
) -> QuantizedKV:
    """Quantize k, v [batch, heads, seq, head_dim], or lists of them (one per layer, all of one
    shape and dtype; the result then has a leading layer axis)."""
    one = isinstance(k, torch.Tensor)
    if isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor):
        ks, vs = [k], [v]
    elif not isinstance(k, torch.Tensor) and not isinstance(v, torch.Tensor):
        ks, vs = list(k), list(v)
    else:
        raise TypeError("k and v must both be tensors or both be sequences of tensors")
    reference.validate(ks, vs)
    if choose_impl(impl, ks[0]) == "triton":
        from . import triton as kernel

        parts = kernel.quantize(ks, vs)
    else:
        parts = reference.quantize(ks, vs)
    k_q, v_q, k_scale, v_scale = (t[0] for t in parts) if one else parts
    return QuantizedKV(k_q, v_q, k_scale, v_scale, dtype=ks[0].dtype)


def dequantize_kv(q: QuantizedKV, impl: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    """(k, v) in the original dtype, shaped like q.k (with its layer axis when it has one)."""
    if not isinstance(q, QuantizedKV):
        raise TypeError(f"dequantize_kv expects a QuantizedKV, got {type(q).__name__}")
    parts = (q.k, q.v, q.k_scale, q.v_scale)
    if choose_impl(impl, *parts) == "triton":
        from . import triton as kernel

        return kernel.dequantize(*parts, q.dtype)
    return reference.dequantize(*parts, q.dtype)


__all__ = ["QuantizedKV", "dequantize_kv", "quantize_kv"]
