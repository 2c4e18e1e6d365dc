"""Torch reference for similarity top-k (retrieval of frames/tiles by embedding): spec + CPU
path."""

from __future__ import annotations

import torch

from ..impl import check_float

EPS = 1e-12  # floor on a vector's norm, as torch.nn.functional.normalize uses


def validate(queries: torch.Tensor, keys: torch.Tensor, k: int) -> None:
    check_float("queries", queries)
    if queries.ndim != 2 or keys.ndim != 2 or queries.shape[1] != keys.shape[1]:
        raise ValueError(
            f"queries must be [Q, D] and keys [N, D]; got {tuple(queries.shape)} "
            f"and {tuple(keys.shape)}"
        )
    if keys.dtype != queries.dtype:
        raise TypeError(
            f"queries and keys must share a dtype, got {queries.dtype} and {keys.dtype}"
        )
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= keys.shape[0]:
        raise ValueError(f"k must be an int in [1, {keys.shape[0]}], got {k!r}")


def scores(queries: torch.Tensor, keys: torch.Tensor, normalize: bool) -> torch.Tensor:
    q, kk = queries.float(), keys.float()
    if normalize:
        q = q / q.norm(dim=1, keepdim=True).clamp_min(EPS)
        kk = kk / kk.norm(dim=1, keepdim=True).clamp_min(EPS)
    return q @ kk.T


def similarity_topk(queries, keys, k: int, normalize: bool):
    return torch.topk(scores(queries, keys, normalize), k, dim=1)
