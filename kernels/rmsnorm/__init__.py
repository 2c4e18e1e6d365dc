"""RMSNorm and an in-place patch that routes a HF model's RMSNorm modules through it."""

from __future__ import annotations

import torch

from ..impl import choose_impl
from . import reference
from .patch import RMSNormPatch, patch_rmsnorm


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, impl: str = "auto"
) -> torch.Tensor:
    """y = weight * rmsnorm(x), with Qwen2RMSNorm numerics."""
    reference.validate(x, weight)
    if choose_impl(impl, x, weight) == "triton":
        from . import triton as kernel

        return kernel.rms_norm(x, weight, eps)
    return reference.rms_norm(x, weight, eps)


__all__ = ["RMSNormPatch", "patch_rmsnorm", "rms_norm"]
