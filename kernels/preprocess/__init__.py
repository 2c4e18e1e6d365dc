"""Fused uint8 HWC image -> normalized Qwen2-VL patch rows (`pixel_values`) in one pass."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..impl import choose_impl
from . import reference


def patchify_normalize(
    pixels: torch.Tensor,
    mean: Sequence[float],
    std: Sequence[float],
    patch_size: int = 14,
    temporal_patch_size: int = 2,
    merge_size: int = 2,
    rescale: float = 1 / 255,
    impl: str = "auto",
) -> tuple[torch.Tensor, tuple[int, int, int]]:
    """Return (patches float32 [N, 3*T*ps*ps], grid_thw (1, H//ps, W//ps)).

    `pixels` is one RGB image, uint8 [H, W, 3], already resized to multiples of
    patch_size*merge_size; the layout equals `Qwen2VLImageProcessor(do_resize=False)`'s.
    """
    reference.validate(pixels, mean, std, patch_size, temporal_patch_size, merge_size)
    mean_t, std_t = reference.fused_mean_std(mean, std, rescale, pixels.device)
    args = (pixels, mean_t, std_t, patch_size, temporal_patch_size, merge_size)
    if choose_impl(impl, pixels) == "triton":
        from . import triton as kernel

        patches = kernel.patchify_normalize(*args)
    else:
        patches = reference.patchify_normalize(*args)
    return patches, (1, pixels.shape[0] // patch_size, pixels.shape[1] // patch_size)


__all__ = ["patchify_normalize"]
