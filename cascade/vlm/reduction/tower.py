"""`tower`: drops whole merge units *before* the vision tower, so it saves tower compute as well as
LLM prefill.

The family drops merge units (the spatial_merge_size² patches that become one LLM token) from the
patch sequence and the tower encodes the kept patches only (`FamilyRuntime.tower_keep` /
`FamilyRuntime.encode(..., keep=)`; families opt in with `Family.tower_reduction`: Qwen2-VL,
Qwen2.5-VL, Qwen3-VL). The budget is one unit per cell: the merged grid is cut into
round(h*sqrt(r)) x round(w*sqrt(r)) cells (the pool bins, non-overlapping), so, like pool, the
count follows the grid. Selection (`tower_select`) costs one pass over the pixels:

- guided (`ReductionConfig.keep_regions`: the text lines, detections and layout regions the
  cascade found in the image, most needed first): every unit the leading boxes (the question's
  target and the lines on its row, `KeepRegions.lead`) overlap, then their margins of one unit,
  then the same for the other boxes, box by box in order while the budget holds (a box that
  does not fit is skipped, never cut). What is left of the budget goes to the rule below, cells
  without a kept unit first, so the rest of the image stays in view, but never more than a
  tenth of the image's units: the rest grows the kept evidence outward, ring by ring (of a ring
  that does not fit, the units most enclosed first: holes, the steps along a tilted line), so
  the text sits inside one solid kept region with its surroundings (a denser field of isolated
  units reads as text to a text detector and hides the real text from it);
- unguided (no evidence): each cell keeps its one unit whose normalized pixel values vary most
  (texture/detail). Text is what this cuts apart (one 28-px block of a word kept, its neighbours
  dropped), which is why `vlm_answer` never applies it unguided to a reading question.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .base import KeepRegions, Reduction, register_reduction

if TYPE_CHECKING:
    import torch

__all__ = ["Tower", "tower_select", "evidence_units", "box_units"]

# Float slack when a box edge lands exactly on a unit boundary (box coordinates come through a
# crop's scale): 1e-6 of a unit never moves a real edge across a unit.
_EDGE_SLACK = 1e-6
# Scattered single units (the cover rule's) stay under this share of the image's units; what is
# over goes to the evidence's surroundings. A denser field of isolated units reads as text to a
# text detector and hides the real text from it: on the dev split, signs kept whole among ~1/4 of
# the image in scattered units were not read, and were at keep 0.1 (~1/10). Tuned on dev
# (benchmarks/tower_evidence.py --split dev, keep 0.25; the full image reads 108 of 110): no cap
# 97 of those 108 read, 0.15 102, 0.1 104 (more growth costs two photographed pages what 0.15
# reads); keep 0.1 is not changed by it (its budget is about a tenth).
_SCATTER_MAX = 0.1


@register_reduction("tower")
class Tower(Reduction):
    """Encode the units the evidence covers, then the most detailed unit of each cell (before
    the tower)."""

    where = "before_tower"


def box_units(
    box: tuple[float, float, float, float],
    size: tuple[int, int],
    units_hw: tuple[int, int],
    margin: int = 0,
) -> tuple[int, int, int, int]:
    """The merge units a box overlaps: (row0, row1, col0, col1), ends exclusive, clipped to the
    grid. box: (x0, y0, x1, y1) in the pixels of an image of `size` (width, height); units_hw: the
    merged grid (rows, cols) the family resizes that image to. The resize scales each axis
    uniformly (source x -> x * resized_w / width, and a unit is resized_w / cols pixels wide), so
    source x lies in unit column floor(x * cols / width): exact for any image size, a multiple of
    the unit or not. margin: units added on every side."""
    (w, h), (rows, cols) = size, units_hw
    x0, y0, x1, y1 = box
    c0 = math.floor(x0 * cols / w + _EDGE_SLACK) - margin
    c1 = math.ceil(x1 * cols / w - _EDGE_SLACK) + margin
    r0 = math.floor(y0 * rows / h + _EDGE_SLACK) - margin
    r1 = math.ceil(y1 * rows / h - _EDGE_SLACK) + margin
    return max(0, r0), min(rows, max(r1, r0 + 1)), max(0, c0), min(cols, max(c1, c0 + 1))


def evidence_units(
    regions: KeepRegions, grid: tuple[int, int, int], margin: int = 1
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per box of `regions` (in order), the unit indices (row-major over the merged (t, h, w)
    grid, every frame) it overlaps: (with the margin, without it). Empty boxes are left out."""
    import torch

    t, h, w = grid
    out = []
    for box in regions.boxes:
        if box[2] <= box[0] or box[3] <= box[1]:
            continue
        per_margin = []
        for m in (margin, 0):
            r0, r1, c0, c1 = box_units(box, regions.size, (h, w), m)
            rr, cc = torch.meshgrid(torch.arange(r0, r1), torch.arange(c0, c1), indexing="ij")
            plane = (rr * w + cc).reshape(-1)
            per_margin.append((torch.arange(t)[:, None] * h * w + plane[None]).reshape(-1))
        out.append((per_margin[0], per_margin[1]))
    return out


def _evidence_order(regions: KeepRegions, grid: tuple[int, int, int]) -> list[torch.Tensor]:
    """The unit groups to keep, in order, each kept whole when it fits what is left: the leading
    boxes' own units (the question's target and the lines on its row, `KeepRegions.lead`), then
    their margins, then every other box's own units, then their margins. Every box's own units
    come before its margin because under a tight budget more boxes are kept whole that way (a
    margin triples a one-unit-high line); the target's margins come before the other boxes
    because its glyphs may reach past its box (a line photographed at an angle, ascenders an OCR
    box leaves out)."""
    # evidence_units leaves empty boxes out: count the leading ones it keeps
    lead = sum(b[2] > b[0] and b[3] > b[1] for b in regions.boxes[: regions.lead])
    units = evidence_units(regions, grid)
    out: list = []
    for part in (units[:lead], units[lead:]):
        out += [core for _, core in part] + [with_margin for with_margin, _ in part]
    return out


def _variance(units: torch.Tensor) -> torch.Tensor:
    """Per unit, the variance of its normalized pixel values."""
    import torch

    # two one-pass reductions (||x||² and Σx; torch.var's two-pass kernel is ~20x slower on CPU);
    # normalized pixels are O(1), so float32 cancellation is negligible here
    x = units.float()
    f = x.shape[1]
    return (torch.linalg.vector_norm(x, dim=1).square() - x.sum(1).square() / f) / max(f - 1, 1)


def _cells(grid: tuple[int, int, int], keep_ratio: float, device) -> tuple[torch.Tensor, int]:
    """(cell of each unit, number of cells): round(h*sqrt(r)) x round(w*sqrt(r)) per frame, the
    cell of row i being i*oh // h."""
    import torch

    t, h, w = grid
    oh, ow = max(1, round(h * math.sqrt(keep_ratio))), max(1, round(w * math.sqrt(keep_ratio)))
    rows = torch.arange(h, device=device) * oh // h
    cols = torch.arange(w, device=device) * ow // w
    cell = (
        (torch.arange(t, device=device)[:, None, None] * oh + rows[None, :, None]) * ow
        + cols[None, None, :]
    ).reshape(-1)
    return cell, t * oh * ow


def _best_per_cell(score: torch.Tensor, cell: torch.Tensor) -> torch.Tensor:
    """Mask of each cell's highest-scoring unit (ties to the lower index)."""
    import torch

    # best first (stable: ties keep the lower index), then grouped by cell (stable again)
    order = torch.argsort(-score, stable=True)
    order = order[torch.argsort(cell[order], stable=True)]
    first = torch.ones_like(order, dtype=torch.bool)
    first[1:] = cell[order][1:] != cell[order][:-1]
    mask = torch.zeros_like(score, dtype=torch.bool)
    mask[order[first]] = True
    return mask


def _grow(kept: torch.Tensor, grid: tuple[int, int, int], n: int) -> torch.Tensor:
    """`kept` with up to `n` more units: the rings around the kept ones (8-neighbours, per frame),
    nearest ring first; of a ring that does not fit, the units most enclosed by kept ones first
    (a hole, the step of a staircase along a tilted line), then in row-major order."""
    import torch

    t, h, w = grid
    kept = kept.clone()
    while n > 0:
        plane = kept.reshape(t, 1, h, w).float()
        ring = (torch.nn.functional.max_pool2d(plane, 3, stride=1, padding=1) > 0).reshape(
            -1
        ) & ~kept
        new = torch.nonzero(ring).reshape(-1)
        if new.numel() == 0:
            break
        enclosed = torch.nn.functional.avg_pool2d(plane, 3, stride=1, padding=1).reshape(-1)
        new = new[torch.argsort(-enclosed[new], stable=True)][:n]
        kept[new] = True
        n -= new.numel()
    return kept


def tower_select(
    units: torch.Tensor,
    grid: tuple[int, int, int],
    keep_ratio: float,
    regions: KeepRegions | None = None,
) -> torch.Tensor:
    """The merge units the `tower` method keeps for one image, ascending.

    units: [t*h*w, F] the image's normalized patch values grouped per merge unit (row-major over
    the merged (t, h, w) grid, F = merge² * channels * temporal * patch²). regions: the evidence
    to keep (module docstring); None or no boxes: one unit per cell, its most varied. No model,
    no question."""
    import torch

    t, h, w = grid
    if keep_ratio >= 1.0:
        return torch.arange(t * h * w, device=units.device)
    score = _variance(units)
    cell, budget = _cells(grid, keep_ratio, units.device)
    if regions is None or not regions.boxes:
        return torch.nonzero(_best_per_cell(score, cell)).reshape(-1)
    kept = torch.zeros_like(score, dtype=torch.bool)
    for group in _evidence_order(regions, grid):
        new = kept.clone()
        new[group.to(units.device)] = True
        if int(new.sum()) <= budget:
            kept = new
    left = budget - int(kept.sum())
    # scattered single units stay under a share of the image (_SCATTER_MAX); what is over goes
    # to the evidence's surroundings, nearest first, so the text sits in one solid kept region
    over = left - int(_SCATTER_MAX * t * h * w)
    if over > 0:
        kept = _grow(kept, grid, over)
        left = budget - int(kept.sum())
    if left > 0:
        # cells the evidence left empty get their most varied unit first (coverage), then the
        # most varied units anywhere
        covered = torch.zeros(int(cell.max()) + 1, dtype=torch.bool, device=units.device)
        covered[cell[kept]] = True
        spread = _best_per_cell(score.masked_fill(kept, float("-inf")), cell) & ~covered[cell]
        rank = torch.argsort(-score, stable=True)
        rank = rank[torch.argsort((~spread[rank]).to(torch.uint8), stable=True)]
        rank = rank[~kept[rank]]
        kept[rank[:left]] = True
    return torch.nonzero(kept).reshape(-1)
