"""Torch reference RMSNorm, numerically the same as transformers' Qwen2RMSNorm/LlamaRMSNorm.

Normalize in float32, round back to the input dtype, then multiply by the weight (so the result
dtype is promote(x.dtype, weight.dtype), as in Qwen2RMSNorm).
"""

from __future__ import annotations

import torch

from ..impl import check_float


def validate(x: torch.Tensor, weight: torch.Tensor) -> None:
    check_float("x", x)
    check_float("weight", weight)
    if x.ndim < 1 or weight.ndim != 1 or weight.shape[0] != x.shape[-1]:
        raise ValueError(
            f"weight must be [D] with D = x.shape[-1]; got x {tuple(x.shape)}, "
            f"weight {tuple(weight.shape)}"
        )


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)
