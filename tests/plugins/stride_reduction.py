"""A reduction method from outside the package, in one file: `stride` keeps evenly spaced visual
tokens (first and last included), the plainest question-agnostic selection.

A `Selection` keeps exactly round(n * keep_ratio) tokens; `select` says which. Registering it is
all it takes for `ReductionConfig("stride", 0.25)`, a `models:` entry's `reduction: stride`, a
stage's `reduction` param and `cascade stages` to know it.
"""

from __future__ import annotations

import torch

from cascade.kernels.dispatch import Ops
from cascade.vlm.reduction import Reduced, ReductionConfig, Selection, register_reduction


@register_reduction("stride")
class Stride(Selection):
    """Keep k evenly spaced tokens in reading order."""

    def select(self, x: torch.Tensor, k: int, config: ReductionConfig, ops: Ops) -> Reduced:
        index = torch.linspace(0, x.shape[0] - 1, k, device=x.device).round().long()
        return Reduced(x.index_select(0, index), index)
