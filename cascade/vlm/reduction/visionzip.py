"""`visionzip`: VisionZip-style "dominant" tokens plus a few merged "contextual" ones.

Dominant tokens by an attention-free distinctiveness score (1 - cos to the mean token, through
the kernels' "dominant" score; VisionZip uses [CLS] attention, which Qwen's tower lacks), plus a
few contextual tokens, each the average of the remaining tokens most similar to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Reduced, ReductionConfig, Selection, register_reduction, unit_rows

if TYPE_CHECKING:
    import torch

    from ...kernels.dispatch import Ops


@register_reduction("visionzip")
class VisionZip(Selection):
    """Keep the most distinctive tokens and merge the rest into a few contextual ones."""

    def select(self, x: torch.Tensor, k: int, config: ReductionConfig, ops: Ops) -> Reduced:
        import torch

        n = x.shape[0]
        n_ctx = min(int(round(k * config.visionzip_contextual)), k - 1, n - k) if k < n else 0
        # The dominant part is the kernel op's "dominant" method: keep the k - n_ctx tokens least
        # like the mean token (score -cos(x, sum), ties to the earlier token, index ascending). This
        # ranking equals the former argsort of 1 - cos(x, mean) in exact arithmetic; the two float
        # formulas can round a near-tie differently, so rare picks may differ at the last ulp.
        dominant_x, dominant = ops.score_and_gather(x, k - n_ctx, method="dominant")
        if n_ctx == 0:
            return Reduced(dominant_x, dominant)
        u = unit_rows(x)
        rest_mask = torch.ones(n, dtype=torch.bool, device=x.device)
        rest_mask[dominant] = False
        rest = rest_mask.nonzero().squeeze(1)
        # Contextual targets evenly spaced over the remaining tokens (VisionZip's uniform sampling);
        # every remaining token joins the target it is most similar to, and the group is averaged.
        targets = rest[torch.linspace(0, len(rest) - 1, n_ctx, device=x.device).round().long()]
        assign = (u[rest] @ u[targets].T).argmax(1)
        merged = torch.zeros(n_ctx, x.shape[1], dtype=torch.float32, device=x.device)
        merged.index_add_(0, assign, x[rest].float())
        merged /= torch.bincount(assign, minlength=n_ctx).clamp(min=1).unsqueeze(1).float()
        index = torch.cat([dominant, targets])
        embeds = torch.cat([dominant_x, merged.to(x.dtype)])
        order = torch.argsort(index)
        return Reduced(embeds[order], index[order])
