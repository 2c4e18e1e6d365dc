"""Attention-free visual token pruning: score every token, keep the top `keep`, in order."""

from __future__ import annotations

import torch

from ..impl import choose_impl
from . import reference
from .reference import METHODS


def score_and_gather(
    tokens: torch.Tensor, keep: int, method: str = "dominant", impl: str = "auto"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (kept_tokens [keep, D], kept_index [keep] int64, ascending).

    keep == N returns `tokens` itself (no copy) and arange(N), so a keep ratio of 1.0 reproduces
    the unpruned model exactly. Top-k selection runs in torch between the scoring and the gather
    kernels; see reference.keep_scores for the scores.
    """
    reference.validate(tokens, keep, method)
    n = tokens.shape[0]
    if keep == n:
        return tokens, torch.arange(n, device=tokens.device)
    if choose_impl(impl, tokens) == "triton":
        from . import triton as kernel

        index = reference.select(kernel.keep_scores(tokens, method, reference.EPS), keep)
        return kernel.gather(tokens, index), index
    index = reference.select(reference.keep_scores(tokens, method), keep)
    return reference.gather(tokens, index), index


__all__ = ["METHODS", "score_and_gather"]
