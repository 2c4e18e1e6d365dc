"""Training-free visual token reduction, applied to the vision tower's merged output embeddings.

Every pre-LLM method here sees only the image's own tokens, never the question, so the reduced
visual prefix (and its KV cache) is the same for every question about the same media; that is what
lets the prefix cache pay on turn 2 (DESIGN.md §4). Question-dependent selection belongs upstream
(retrieval, tiles). The one exception is `fastv` (cascade.vlm.fastv): it ranks visual tokens by
the attention they get from the *last prompt token* inside the LLM, so it depends on the question
and is never cached.

A method returns the kept embeddings and, for each, the index of the original token whose M-RoPE
position it takes: positions are computed for the full sequence and the dropped columns removed, so
a kept token sits exactly where it sat in the unpruned model.

Methods (all attention-free, so the LLM keeps SDPA/FlashAttention):
- none:      keep everything (keep_ratio must be 1.0).
- pool:      grid-aware average pooling of the merged token grid to round(h*sqrt(r)) x
             round(w*sqrt(r)) bins (r = 0.25 on an even grid is exactly 2x2 averaging); each pooled
             token takes the position of its bin's centre token. Its count follows the grid, so it
             can differ from round(r*n) by a row or column.
- divprune:  DivPrune-style diversity: greedy max-min (farthest point) selection in cosine
             distance, seeded with the token least like the mean.
- visionzip: VisionZip-style: "dominant" tokens by an attention-free distinctiveness score
             (1 - cos to the mean token, via cascade.kernels.prune's "dominant" score; VisionZip
             uses [CLS] attention, which Qwen's tower lacks),
             plus a few "contextual" tokens, each the average of the remaining tokens most similar
             to it.
- dart:      DART-style duplicate removal: a few pivot tokens (largest norm), then the tokens least
             similar to any pivot; near-duplicates of the pivots are dropped.
- tower:     acts *before* the vision tower, so it saves tower compute as well as LLM prefill: the
             family drops whole merge units (the spatial_merge_size² patches that become one LLM
             token) from the patch sequence and the tower encodes the kept patches only
             (`Family.tower_keep` / `Family.encode(..., keep=)`; Qwen2-VL, Qwen2.5-VL, Qwen3-VL).
             Selection (`tower_select`) is question-agnostic and costs one pass over the pixels:
             the merged grid is cut into round(h*sqrt(r)) x round(w*sqrt(r)) cells (the pool
             bins, non-overlapping) and each cell keeps its one unit whose normalized pixel values
             vary most (texture/detail), so kept tokens cover the whole image. Like pool, its count
             follows the grid.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import InputError, did_you_mean
from ..kernels.prune import score_and_gather

__all__ = ["ReductionConfig", "METHODS", "PRE_LLM_METHODS", "TOWER_METHODS", "Reduced", "reduce_tokens",
           "keep_count", "tower_select"]

METHODS = ("none", "pool", "divprune", "visionzip", "dart", "fastv", "tower")
PRE_LLM_METHODS = ("pool", "divprune", "visionzip", "dart")
# Methods that act before the vision tower (PRE_LLM_METHODS act on its output); a family must
# support them (`Family.reductions`).
TOWER_METHODS = ("tower",)


@dataclass(frozen=True)
class ReductionConfig:
    """How many visual tokens the LLM sees, and how they are chosen.

    method: one of METHODS. keep_ratio: fraction of merged visual tokens kept, in (0, 1].
    fastv_layer: FastV's K, the decoder layer after which visual tokens are dropped.
    visionzip_contextual: fraction of the kept budget spent on merged contextual tokens.
    dart_pivots: number of pivot tokens per image for `dart`.
    """

    method: str = "none"
    keep_ratio: float = 1.0
    fastv_layer: int = 2
    visionzip_contextual: float = 0.15
    dart_pivots: int = 8

    def __post_init__(self):
        if self.method not in METHODS:
            raise InputError(f"unknown reduction method '{self.method}'"
                             f"{did_you_mean(self.method, METHODS)}; choose one of {list(METHODS)}")
        r = self.keep_ratio
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0.0 < r <= 1.0:
            raise InputError(f"keep_ratio must be a number in (0, 1], got {r!r}")
        if self.method == "none" and r != 1.0:
            raise InputError(f"method 'none' keeps every token; keep_ratio {r} needs a method such "
                             f"as {list(PRE_LLM_METHODS)} or 'fastv'")
        if self.fastv_layer < 1:
            raise InputError(f"fastv_layer must be >= 1, got {self.fastv_layer}")
        if not 0.0 <= self.visionzip_contextual < 1.0:
            raise InputError(f"visionzip_contextual must be in [0, 1), got {self.visionzip_contextual}")
        if self.dart_pivots < 1:
            raise InputError(f"dart_pivots must be >= 1, got {self.dart_pivots}")

    @property
    def is_identity(self) -> bool:
        """True when the LLM sees every visual token (keep 1.0 reproduces the unpruned model)."""
        return self.method == "none" or self.keep_ratio == 1.0

    @property
    def before_tower(self) -> bool:
        """True when the reduction drops patches before the vision tower (method `tower`)."""
        return self.method in TOWER_METHODS and not self.is_identity

    @property
    def question_dependent(self) -> bool:
        """FastV ranks tokens by the question's attention: its prefix cannot be cached."""
        return self.method == "fastv" and not self.is_identity

    def cache_key(self) -> tuple:
        """The part of a KV prefix cache key that depends on the reduction (identity collapses)."""
        if self.is_identity:
            return ("none",)
        return (self.method, float(self.keep_ratio), self.visionzip_contextual, self.dart_pivots)


@dataclass(frozen=True)
class Reduced:
    """Kept embeddings [k, D] and the original index [k] (ascending) whose position each takes."""

    embeds: torch.Tensor
    index: torch.Tensor


def keep_count(n: int, keep_ratio: float) -> int:
    """Tokens kept out of n by the count-exact methods: round(n * r), at least 1."""
    return max(1, min(n, int(round(n * keep_ratio))))


def _pool(x: torch.Tensor, grid: tuple[int, int, int], r: float) -> Reduced:
    t, h, w = grid
    oh, ow = max(1, round(h * math.sqrt(r))), max(1, round(w * math.sqrt(r)))
    img = x.reshape(t, h, w, -1).permute(0, 3, 1, 2).float()  # [t, D, h, w]
    pooled = F.adaptive_avg_pool2d(img, (oh, ow)).permute(0, 2, 3, 1).reshape(-1, x.shape[-1])
    # adaptive pooling bin i spans [floor(i*h/oh), ceil((i+1)*h/oh)); take its centre token.
    rows, cols = _bin_centres(h, oh, x.device), _bin_centres(w, ow, x.device)
    frames = torch.arange(t, device=x.device) * (h * w)
    index = (frames[:, None, None] + rows[None, :, None] * w + cols[None, None, :]).reshape(-1)
    return Reduced(pooled.to(x.dtype), index)


def _bin_centres(size: int, bins: int, device) -> torch.Tensor:
    i = torch.arange(bins, device=device)
    start = i * size // bins
    end = -(-(i + 1) * size // bins)  # ceil division
    return (start + end - 1) // 2


def _unit(x: torch.Tensor) -> torch.Tensor:
    return F.normalize(x.float(), dim=-1, eps=1e-8)


# Tokens per round of `_divprune` (see there).
DIVPRUNE_POOL = 128


def _divprune(x: torch.Tensor, k: int) -> torch.Tensor:
    """Greedy max-min (farthest point) selection in cosine distance, seeded with the token least
    like the mean: each pick is the token farthest from everything picked so far (ties to the
    lower index).

    Picking one token at a time costs a matrix-vector product over all n x D embeddings per pick
    (memory-bound: ~1 s for 1,024 of 4,096 tokens on one CPU core). Instead the greedy runs in
    rounds. A round takes the DIVPRUNE_POOL tokens farthest from the kept set (the overall
    farthest always among them) and runs the greedy on that pool alone, with the pool's pairwise
    distances. A pick made there is the true next pick as long as it still beats the best token
    outside the pool: outside tokens' distances can only shrink, so their values at the start of
    the round bound them. When a pool pick no longer beats that bound the round ends, one
    [picks x n] matrix product brings every token's distance up to date, and the next round
    starts. Rounds yield ~50 picks each, and each pick's distances to all tokens are computed
    once. The picks are those of the one-at-a-time greedy (tested), up to float rounding of the
    distances in matrix products of other shapes.
    """
    u = _unit(x)
    n = u.shape[0]
    first = int((u @ _unit(x.mean(0, keepdim=True)).T).squeeze(1).argmin())
    min_dist = 1.0 - u @ u[first]  # distance of every token to the kept set; kept ones -1
    min_dist[first] = -1.0
    chosen = [first]
    while len(chosen) < k:
        pool = torch.topk(min_dist, min(DIVPRUNE_POOL, n)).indices
        best = min_dist.argmax()
        if not bool((pool == best).any()):  # ties at the top may leave the first index out
            pool[-1] = best
        pool = torch.sort(pool).values  # ascending: argmax's first-index ties are token ties
        outside = min_dist.index_fill(0, pool, -2.0)
        bound_at = int(outside.argmax())
        bound = outside[bound_at].item()
        # the pool's greedy is ~50 steps on 128 numbers: on the host, one transfer per round
        pool_dist = (1.0 - u[pool] @ u[pool].T).cpu().numpy()
        vals, ids = min_dist[pool].cpu().numpy(), pool.cpu().numpy()
        picks: list[int] = []
        while len(chosen) + len(picks) < k:
            i = int(vals.argmax())
            if vals[i] < bound or (vals[i] == bound and ids[i] > bound_at):
                break  # a token outside the pool may now be the farthest
            picks.append(int(ids[i]))
            np.minimum(vals, pool_dist[i], out=vals)
            vals[i] = -1.0
        # min over picks of (1 - dot) is 1 - max(dot): rounding of 1 - x is monotone
        torch.minimum(min_dist, 1.0 - (u[picks] @ u.T).amax(0), out=min_dist)
        min_dist[picks] = -1.0
        chosen += picks
    return torch.tensor(sorted(chosen), device=x.device)


def _visionzip(x: torch.Tensor, k: int, contextual_frac: float, impl: str) -> Reduced:
    n = x.shape[0]
    n_ctx = min(int(round(k * contextual_frac)), k - 1, n - k) if k < n else 0
    # The dominant part is the kernel op's "dominant" method: keep the k - n_ctx tokens least
    # like the mean token (score -cos(x, sum), ties to the earlier token, index ascending). This
    # ranking equals the former argsort of 1 - cos(x, mean) in exact arithmetic; the two float
    # formulas can round a near-tie differently, so rare picks may differ at the last ulp.
    dominant_x, dominant = score_and_gather(x, k - n_ctx, method="dominant", impl=impl)
    if n_ctx == 0:
        return Reduced(dominant_x, dominant)
    u = _unit(x)
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


def _dart(x: torch.Tensor, k: int, pivots: int) -> torch.Tensor:
    # Not the kernel op's "duplicate" method: that scores a token by its cosine to its immediate
    # neighbours, DART by its cosine to the pivot tokens; wiring it here would change the method.
    p = min(pivots, k)
    pivot = torch.argsort(x.float().norm(dim=-1), descending=True, stable=True)[:p]
    u = _unit(x)
    sim = (u @ u[pivot].T).max(1).values
    sim[pivot] = float("inf")  # pivots are kept; rank the rest by how unlike the pivots they are
    others = torch.argsort(sim, stable=True)[: k - p]
    return torch.sort(torch.cat([pivot, others])).values


def tower_select(units: torch.Tensor, grid: tuple[int, int, int], keep_ratio: float) -> torch.Tensor:
    """The merge units the `tower` method keeps for one image, ascending.

    units: [t*h*w, F] the image's normalized patch values grouped per merge unit (row-major over
    the merged (t, h, w) grid, F = merge² * channels * temporal * patch²). Each frame's grid is
    cut into round(h*sqrt(r)) x round(w*sqrt(r)) non-overlapping cells (cell of row i:
    i*oh // h); each cell keeps the unit whose values have the largest variance (ties to the
    lower index). One pass over the pixels, no model, no question."""
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


def reduce_tokens(x: torch.Tensor, grid: tuple[int, int, int], config: ReductionConfig,
                  impl: str = "auto") -> Reduced:
    """Reduce one image's merged visual tokens x [n, D] laid out on grid (t, h, w), n = t*h*w.
    `impl` ("auto" | "triton" | "torch") picks the cascade.kernels prune op's implementation."""
    n = x.shape[0]
    if config.before_tower:
        raise ValueError("the 'tower' reduction drops patches before the vision tower; its tokens "
                         "come reduced from Family.encode(..., keep=), not from reduce_tokens")
    if config.is_identity or config.method == "fastv":
        return Reduced(x, torch.arange(n, device=x.device))
    if config.method == "pool":
        return _pool(x, grid, config.keep_ratio)
    k = keep_count(n, config.keep_ratio)
    if k == n:
        return Reduced(x, torch.arange(n, device=x.device))
    if config.method == "visionzip":
        return _visionzip(x, k, config.visionzip_contextual, impl)
    index = _divprune(x, k) if config.method == "divprune" else _dart(x, k, config.dart_pivots)
    return Reduced(x.index_select(0, index), index)
