"""Torch reference for attention-free visual token pruning scores: the spec and the CPU path.

Both scores need no attention weights, so the vision tower and LLM keep FlashAttention/SDPA.
Scores are "keep scores": higher means more worth keeping.
"""

from __future__ import annotations

import torch

METHODS = ("dominant", "duplicate")
EPS = 1e-8  # floor on |a|*|b|, as torch.nn.functional.cosine_similarity uses


def validate(tokens: torch.Tensor, keep: int, method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if tokens.ndim != 2:
        raise ValueError(f"tokens must be [N, D], got shape {tuple(tokens.shape)}")
    if tokens.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"tokens must be float16, bfloat16 or float32, got {tokens.dtype}")
    if isinstance(keep, bool) or not isinstance(keep, int) or not 0 <= keep <= tokens.shape[0]:
        raise ValueError(f"keep must be an int in [0, {tokens.shape[0]}], got {keep!r}")


def _cos(dot: torch.Tensor, sq_a: torch.Tensor, sq_b: torch.Tensor) -> torch.Tensor:
    return dot / torch.clamp(torch.sqrt(sq_a) * torch.sqrt(sq_b), min=EPS)


def keep_scores(tokens: torch.Tensor, method: str) -> torch.Tensor:
    """float32 [N] keep scores.

    dominant: -cos(token, mean token). Tokens close to the mean carry what every token carries;
      the distinctive ones are kept (VisionZip's idea without its attention scores). The column
      sum stands in for the mean: cosine ignores scale, and it saves a division.
    duplicate: -max cos(token, immediate neighbour) (DART-style): a token that repeats its
      neighbour adds little. A missing neighbour counts as no similarity (-inf).
    """
    x = tokens.float()
    sq = (x * x).sum(-1)
    if method == "dominant":
        s = x.sum(0)
        return -_cos(x @ s, sq, (s * s).sum())
    cos_next = _cos((x[:-1] * x[1:]).sum(-1), sq[:-1], sq[1:])
    none = torch.full((1,), float("-inf"), device=x.device)
    return -torch.maximum(torch.cat([none, cos_next]), torch.cat([cos_next, none]))


def select(scores: torch.Tensor, keep: int) -> torch.Tensor:
    """Indices of the `keep` highest scores, ascending. A stable sort makes ties pick the earlier
    token, so both implementations select the same tokens whenever their scores agree."""
    top = torch.argsort(scores, descending=True, stable=True)[:keep]
    return torch.sort(top).values


def gather(tokens: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return tokens.index_select(0, index)
