"""Torch reference for Qwen2-VL patch extraction: the spec and the CPU path.

Reproduces `Qwen2VLImageProcessor(do_resize=False)` for one image bit for bit: rescale and
normalize are fused the way transformers fuses them ((x - mean/rescale) / (std/rescale), in
float32), and the image is repeated `temporal_patch_size` times as Qwen does for stills.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def validate(
    pixels: torch.Tensor,
    mean: Sequence[float],
    std: Sequence[float],
    patch_size: int,
    temporal_patch_size: int,
    merge_size: int,
) -> None:
    if pixels.dtype != torch.uint8:
        raise TypeError(f"pixels must be uint8, got {pixels.dtype}")
    if pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ValueError(f"pixels must be [H, W, 3] (HWC, RGB), got shape {tuple(pixels.shape)}")
    if len(mean) != 3 or len(std) != 3:
        raise ValueError(f"mean and std need 3 values (RGB), got {len(mean)} and {len(std)}")
    if min(patch_size, temporal_patch_size, merge_size) < 1:
        raise ValueError("patch_size, temporal_patch_size and merge_size must be >= 1")
    factor = patch_size * merge_size
    h, w = pixels.shape[:2]
    if h == 0 or w == 0 or h % factor or w % factor:
        raise ValueError(
            f"image {h}x{w} must be a non-empty multiple of patch_size*merge_size="
            f"{factor} in both sides; resize it first"
        )


def fused_mean_std(mean, std, rescale: float, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Fold the rescale into mean/std exactly as transformers does (float32, then * 1/rescale)."""
    mean_t = torch.tensor(list(mean), dtype=torch.float32, device=device) * (1.0 / rescale)
    std_t = torch.tensor(list(std), dtype=torch.float32, device=device) * (1.0 / rescale)
    return mean_t, std_t


def patchify_normalize(
    pixels: torch.Tensor,
    mean_t: torch.Tensor,
    std_t: torch.Tensor,
    patch_size: int,
    temporal_patch_size: int,
    merge_size: int,
) -> torch.Tensor:
    h, w, c = pixels.shape
    gh, gw, m, ps = h // patch_size, w // patch_size, merge_size, patch_size
    x = (pixels.permute(2, 0, 1).to(torch.float32) - mean_t[:, None, None]) / std_t[:, None, None]
    # rows ordered (block_h, block_w, merge_h, merge_w) so each 2x2 merge group is contiguous;
    # columns ordered (channel, time, patch_y, patch_x) as the vision tower's Conv3d expects.
    x = x.reshape(c, gh // m, m, ps, gw // m, m, ps).permute(1, 4, 2, 5, 0, 3, 6)
    x = x.unsqueeze(5).expand(-1, -1, -1, -1, -1, temporal_patch_size, -1, -1)
    return x.reshape(gh * gw, c * temporal_patch_size * ps * ps)
