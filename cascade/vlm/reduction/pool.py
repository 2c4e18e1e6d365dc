"""`pool`: grid-aware average pooling of the merged token grid.

The grid is pooled to round(h*sqrt(r)) x round(w*sqrt(r)) bins (r = 0.25 on an even grid is
exactly 2x2 averaging); each pooled token takes the position of its bin's centre token. Its count
follows the grid, so it can differ from round(r*n) by a row or column.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .base import Reduced, Reduction, ReductionConfig, register_reduction

if TYPE_CHECKING:
    import torch

    from ...kernels.dispatch import Ops


def _bin_centres(size: int, bins: int, device) -> torch.Tensor:
    import torch

    i = torch.arange(bins, device=device)
    start = i * size // bins
    end = -(-(i + 1) * size // bins)  # ceil division
    return (start + end - 1) // 2


@register_reduction("pool")
class Pool(Reduction):
    """Average pooling of the token grid to about keep_ratio of its tokens."""

    where = "after_tower"

    def reduce(
        self, x: torch.Tensor, grid: tuple[int, int, int], config: ReductionConfig, ops: Ops
    ) -> Reduced:
        import torch
        import torch.nn.functional as F

        t, h, w = grid
        r = config.keep_ratio
        oh, ow = max(1, round(h * math.sqrt(r))), max(1, round(w * math.sqrt(r)))
        img = x.reshape(t, h, w, -1).permute(0, 3, 1, 2).float()  # [t, D, h, w]
        pooled = F.adaptive_avg_pool2d(img, (oh, ow)).permute(0, 2, 3, 1).reshape(-1, x.shape[-1])
        # adaptive pooling bin i spans [floor(i*h/oh), ceil((i+1)*h/oh)); take its centre token.
        rows, cols = _bin_centres(h, oh, x.device), _bin_centres(w, ow, x.device)
        frames = torch.arange(t, device=x.device) * (h * w)
        index = (frames[:, None, None] + rows[None, :, None] * w + cols[None, None, :]).reshape(-1)
        return Reduced(pooled.to(x.dtype), index)
