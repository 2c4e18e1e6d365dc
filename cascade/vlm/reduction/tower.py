"""`tower`: drops whole merge units *before* the vision tower, so it saves tower compute as well as
LLM prefill.

The family drops merge units (the spatial_merge_size² patches that become one LLM token) from the
patch sequence and the tower encodes the kept patches only (`FamilyRuntime.tower_keep` /
`FamilyRuntime.encode(..., keep=)`; families opt in with `Family.tower_reduction`: Qwen2-VL,
Qwen2.5-VL, Qwen3-VL). Selection (`tower_select`) is question-agnostic and costs one pass over
the pixels: the merged grid is cut into round(h*sqrt(r)) x round(w*sqrt(r)) cells (the pool bins,
non-overlapping) and each cell keeps its one unit whose normalized pixel values vary most
(texture/detail), so kept tokens cover the whole image. Like pool, its count follows the grid.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .base import Reduction, register_reduction

if TYPE_CHECKING:
    import torch

__all__ = ["Tower", "tower_select"]


@register_reduction("tower")
class Tower(Reduction):
    """Encode only the most detailed merge unit of each cell (before the tower)."""

    where = "before_tower"


def tower_select(units: "torch.Tensor", grid: tuple[int, int, int], keep_ratio: float) -> "torch.Tensor":
    """The merge units the `tower` method keeps for one image, ascending.

    units: [t*h*w, F] the image's normalized patch values grouped per merge unit (row-major over
    the merged (t, h, w) grid, F = merge² * channels * temporal * patch²). Each frame's grid is
    cut into round(h*sqrt(r)) x round(w*sqrt(r)) non-overlapping cells (cell of row i:
    i*oh // h); each cell keeps the unit whose values have the largest variance (ties to the
    lower index). One pass over the pixels, no model, no question."""
    import torch

    t, h, w = grid
    if keep_ratio >= 1.0:
        return torch.arange(t * h * w, device=units.device)
    oh, ow = max(1, round(h * math.sqrt(keep_ratio))), max(1, round(w * math.sqrt(keep_ratio)))
    # variance from two one-pass reductions (||x||² and Σx; torch.var's two-pass kernel is ~20x
    # slower on CPU); normalized pixels are O(1), so float32 cancellation is negligible here
    x = units.float()
    f = x.shape[1]
    score = (torch.linalg.vector_norm(x, dim=1).square() - x.sum(1).square() / f) / max(f - 1, 1)
    dev = units.device
    rows = torch.arange(h, device=dev) * oh // h
    cols = torch.arange(w, device=dev) * ow // w
    cell = ((torch.arange(t, device=dev)[:, None, None] * oh + rows[None, :, None]) * ow
            + cols[None, None, :]).reshape(-1)
    # best first (stable: ties keep the lower index), then grouped by cell (stable again)
    order = torch.argsort(-score, stable=True)
    order = order[torch.argsort(cell[order], stable=True)]
    first = torch.ones_like(order, dtype=torch.bool)
    first[1:] = cell[order][1:] != cell[order][:-1]
    return torch.sort(order[first]).values
