"""RMSNorm (optionally fused with the residual add) and an in-place patch for HF models."""
from __future__ import annotations

import torch

from .._dispatch import choose_impl
from . import reference
from .patch import RMSNormPatch, patch_rmsnorm


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
             residual: torch.Tensor | None = None, impl: str = "auto"):
    """y = weight * rmsnorm(x) (Qwen2RMSNorm numerics); with `residual`, return (y, x + residual)
    where y normalizes x + residual (add-then-norm, as Qwen2 decoder layers do)."""
    reference.validate(x, weight, residual)
    tensors = (x, weight) if residual is None else (x, weight, residual)
    if choose_impl(impl, *tensors) == "triton":
        from . import triton as kernel
        return kernel.rms_norm(x, weight, eps, residual)
    if residual is None:
        return reference.rms_norm(x, weight, eps)
    return reference.add_rms_norm(x, residual, weight, eps)


__all__ = ["RMSNormPatch", "patch_rmsnorm", "rms_norm"]
