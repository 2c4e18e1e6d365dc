"""`evs`: temporal token pruning for video frames (Efficient Video Sampling, vLLM's
`--video-pruning-rate`): of consecutive frames, the merge units that repeat the previous frame's
are dropped *before* the vision tower, so they cost neither tower compute nor prefill.

The images of one call are taken as frames in order. A frame's merge unit (the
spatial_merge_size² patches that become one LLM token) is compared with the same unit of the frame
before it, in pixel space (mean absolute difference of the normalized patch values the tower would
read). The first frame, and every frame whose grid differs from the one before it (another shot,
another size), is kept whole; of the other frames' units, the most changed are kept until the
call's budget, `keep_count(total units, keep_ratio)` (keep_ratio = 1 - video_pruning_rate), is
spent; every frame keeps at least its most changed unit. The kept units go through the tower path
of `tower` (`FamilyRuntime.encode(..., keep=)`), so each survivor keeps exactly its positions: in
the tower, and M-RoPE's (t, h, w) in the LLM. A unit that changed is never dropped for one that
did not: a sign that appears is kept in the frame where it appears, and dropped where it only
repeats. keep_ratio 1 keeps every unit (`ReductionConfig.is_identity`: the unreduced model, bit
for bit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Reduction, keep_count, register_reduction

if TYPE_CHECKING:
    import torch

__all__ = ["Evs", "evs_select", "change", "keep_changed"]


@register_reduction("evs")
class Evs(Reduction):
    """Keep the merge units that changed since the previous frame (before the tower)."""

    where = "before_tower"
    sequence = True


def evs_select(
    units: list[torch.Tensor], grids: list[tuple[int, int, int]], keep_ratio: float
) -> list[torch.Tensor]:
    """Per frame, the merge units `evs` keeps (ascending indices).

    units: per frame [n_i, F] its normalized patch values grouped per merge unit (row-major over
    its merged grid); grids: each frame's merged grid (t, h, w). The frames of one call, in order.
    """
    import torch

    if len(units) != len(grids):
        raise ValueError(f"evs: {len(units)} frames of units for {len(grids)} grids")
    if keep_ratio >= 1.0 or not units:
        return [torch.arange(u.shape[0], device=u.device) for u in units]
    previous: list = [None, *zip(units[:-1], grids[:-1], strict=True)]
    scores = [change(u, g, prev) for u, g, prev in zip(units, grids, previous, strict=True)]
    return keep_changed(scores, keep_ratio)


def change(
    units: torch.Tensor,
    grid: tuple[int, int, int],
    previous: tuple[torch.Tensor, tuple[int, int, int]] | None,
) -> torch.Tensor:
    """Per merge unit of a frame, how much it changed since `previous` (that frame's units and
    grid): the mean absolute difference of its pixel values; inf where a shot starts (no frame
    before, or one of another grid)."""
    import torch

    if previous is None or previous[1] != grid:
        return torch.full((units.shape[0],), float("inf"), device=units.device)
    return (units.float() - previous[0].float()).abs().mean(dim=1)


def keep_changed(scores: list[torch.Tensor], keep_ratio: float) -> list[torch.Tensor]:
    """Per frame, the units kept from the frames' `change` scores: a new shot's units and each
    frame's most changed unit, then the most changed until `keep_count(total, keep_ratio)`."""
    import torch

    flat = torch.cat(scores)
    budget = keep_count(flat.numel(), keep_ratio)
    # kept whatever the budget: a new shot's units, and each frame's most changed unit (a frame
    # keeps at least one token, so it stays in the prompt, in its place)
    forced = torch.isinf(flat)
    start = 0
    for s in scores:
        forced[start + int(torch.argmax(s))] = True
        start += s.numel()
    # forced first, then the most changed; stable: ties keep the earlier unit
    order = torch.argsort(-flat, stable=True)
    order = order[torch.argsort((~forced[order]).to(torch.uint8), stable=True)]
    kept = torch.zeros_like(flat, dtype=torch.bool)
    kept[order[: max(budget, int(forced.sum()))]] = True
    out, start = [], 0
    for s in scores:
        out.append(torch.nonzero(kept[start : start + s.numel()]).reshape(-1))
        start += s.numel()
    return out
