"""`dart`: DART-style duplicate removal: a few pivot tokens (largest norm), then the tokens least
similar to any pivot; near-duplicates of the pivots are dropped."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Reduced, ReductionConfig, Selection, register_reduction, unit_rows

if TYPE_CHECKING:
    import torch

    from ...kernels.dispatch import Ops


@register_reduction("dart")
class Dart(Selection):
    """Keep pivot tokens and the tokens least like them."""

    def select(self, x: torch.Tensor, k: int, config: ReductionConfig, ops: Ops) -> Reduced:
        import torch

        # Not the kernel op's "duplicate" method: that scores a token by its cosine to its immediate
        # neighbours, DART by its cosine to the pivot tokens; wiring it here would change the
        # method.
        p = min(config.dart_pivots, k)
        pivot = torch.argsort(x.float().norm(dim=-1), descending=True, stable=True)[:p]
        u = unit_rows(x)
        sim = (u @ u[pivot].T).max(1).values
        sim[pivot] = float(
            "inf"
        )  # pivots are kept; rank the rest by how unlike the pivots they are
        others = torch.argsort(sim, stable=True)[: k - p]
        index = torch.sort(torch.cat([pivot, others])).values
        return Reduced(x.index_select(0, index), index)
