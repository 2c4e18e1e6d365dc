"""Top-k keys by (cosine) similarity for each query, without materializing [Q, N] scores."""

from __future__ import annotations

import torch

from ..impl import choose_impl
from . import reference


def similarity_topk(
    queries: torch.Tensor, keys: torch.Tensor, k: int, normalize: bool = True, impl: str = "auto"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (scores float32 [Q, k] descending, index int64 [Q, k]) of the best keys per query;
    normalize=True ranks by cosine similarity, False by the raw dot product."""
    reference.validate(queries, keys, k)
    if choose_impl(impl, queries, keys) == "triton":
        from . import triton as kernel

        return kernel.similarity_topk(queries, keys, k, normalize, reference.EPS)
    return tuple(reference.similarity_topk(queries, keys, k, normalize))


__all__ = ["similarity_topk"]
