"""The `kernels` choice, decided once: `bind(kernels, device)` -> `Ops`, the fused ops bound to one
implementation.

    ops = bind("auto", torch.device("cuda"))   # Triton on CUDA (when installed), torch otherwise
    patches, grid = ops.patchify_normalize(pixels, mean, std, 14, 2, 2, 1 / 255)
    handle = ops.patch_rmsnorm(model)          # None unless the choice is Triton

The VLM runtime keeps one `Ops` per loaded model (`cascade.vlm.families.FamilyRuntime.ops`) and
calls every op through it: no call passes or re-decides `impl`. Each op is also usable on its own
(`cascade.kernels.<op>`, `impl=` per call, `cascade.kernels.impl.choose_impl`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from .impl import IMPLS, choose_impl
from .kv_quant import QuantizedKV, dequantize_kv, quantize_kv
from .preprocess import patchify_normalize
from .prune import score_and_gather
from .rmsnorm import RMSNormPatch, patch_rmsnorm, rms_norm

__all__ = ["Ops", "bind", "IMPLS"]


@dataclass(frozen=True)
class Ops:
    """The cascade.kernels ops with the implementation chosen once. impl: what runs ("triton" or
    "torch"); requested: what was asked for ("auto", "triton" or "torch")."""

    impl: Literal["triton", "torch"]
    requested: str = "auto"

    def patchify_normalize(
        self,
        pixels: torch.Tensor,
        mean: Sequence[float],
        std: Sequence[float],
        patch_size: int,
        temporal_patch_size: int,
        merge_size: int,
        rescale: float = 1 / 255,
    ) -> tuple[torch.Tensor, tuple[int, int, int]]:
        return patchify_normalize(
            pixels, mean, std, patch_size, temporal_patch_size, merge_size, rescale, impl=self.impl
        )

    def score_and_gather(
        self, tokens: torch.Tensor, keep: int, method: str = "dominant"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return score_and_gather(tokens, keep, method=method, impl=self.impl)

    def quantize_kv(self, k: Any, v: Any) -> QuantizedKV:
        return quantize_kv(k, v, impl=self.impl)

    def dequantize_kv(self, q: QuantizedKV) -> tuple[torch.Tensor, torch.Tensor]:
        return dequantize_kv(q, impl=self.impl)

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        return rms_norm(x, weight, eps, impl=self.impl)

    def patch_rmsnorm(self, model: torch.nn.Module) -> RMSNormPatch | None:
        """Patch the model's RMSNorm modules to the Triton kernel when that is the choice; with
        torch the model keeps transformers' own RMSNorm (which the reference reproduces), so the
        choice costs nothing per call. The handle's `.undo()` restores."""
        return patch_rmsnorm(model, impl="triton") if self.impl == "triton" else None


def bind(kernels: str = "auto", device: torch.device | str = "cpu") -> Ops:
    """Decide `kernels` ("auto" | "triton" | "torch") for tensors on `device`: "auto" is Triton on
    CUDA when triton is installed, else torch; "triton" raises here if it cannot run there (on
    CPU it needs TRITON_INTERPRET=1)."""
    if kernels not in IMPLS:
        raise ValueError(f"kernels must be one of {list(IMPLS)}, got {kernels!r}")
    impl = choose_impl(kernels, torch.empty(0, device=device))
    return Ops(impl, kernels)  # type: ignore[arg-type]
