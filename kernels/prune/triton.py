"""Triton kernels for token pruning: one fused scoring pass and one row gather.

Pipeline: [_column_partials -> _column_finish (dominant only)] -> _keep_scores -> argsort in torch
-> _gather_rows. Selection stays in torch: it touches only N floats, while the kernels touch N*D.

The column sum is a two-level reduction: a grid of (row block, column block) programs each sums
its own ROWS_PER_PARTIAL x BLOCK_D tile into a partial row, then one program per column block adds
the partial rows in a fixed order (deterministic, no atomics: the same input gives the same bits).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_BLOCK_N = 16
_BLOCK_D = 128
ROWS_PER_PARTIAL = 256  # rows one _column_partials program sums (16 of its BLOCK_N steps)
_BLOCK_R = 16


@triton.jit
def _column_partials(
    x_ptr, p_ptr, N, D, stride, ROWS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr
):
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    first = tl.program_id(0) * ROWS
    acc = tl.zeros((BLOCK_N, BLOCK_D), dtype=tl.float32)
    for n0 in range(0, ROWS, BLOCK_N):
        rows = first + n0 + tl.arange(0, BLOCK_N)
        m = (rows[:, None] < N) & (cols[None, :] < D)
        acc += tl.load(
            x_ptr + rows[:, None].to(tl.int64) * stride + cols[None, :], mask=m, other=0.0
        ).to(tl.float32)
    tl.store(p_ptr + tl.program_id(0).to(tl.int64) * D + cols, tl.sum(acc, axis=0), mask=cols < D)


@triton.jit
def _column_finish(p_ptr, s_ptr, R, D, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_D + tl.arange(0, BLOCK_D)
    acc = tl.zeros((BLOCK_R, BLOCK_D), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        m = (rows[:, None] < R) & (cols[None, :] < D)
        acc += tl.load(p_ptr + rows[:, None].to(tl.int64) * D + cols[None, :], mask=m, other=0.0)
    tl.store(s_ptr + cols, tl.sum(acc, axis=0), mask=cols < D)


@triton.jit
def _cos(dot, sq_a, sq_b, EPS: tl.constexpr):
    return dot / tl.maximum(tl.sqrt(sq_a) * tl.sqrt(sq_b), EPS)


@triton.jit
def _keep_scores(
    x_ptr,
    s_ptr,
    out_ptr,
    N,
    D,
    stride,
    DOMINANT: tl.constexpr,
    EPS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    sq = tl.zeros((BLOCK_N,), dtype=tl.float32)
    dot_a = tl.zeros((BLOCK_N,), dtype=tl.float32)  # with the sum (dominant) / next token
    sq_a = tl.zeros((BLOCK_N,), dtype=tl.float32)
    dot_b = tl.zeros((BLOCK_N,), dtype=tl.float32)  # with the previous token (duplicate)
    sq_b = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for d0 in range(0, D, BLOCK_D):
        cols = d0 + tl.arange(0, BLOCK_D)
        cm = cols[None, :] < D
        base = x_ptr + rows[:, None].to(tl.int64) * stride + cols[None, :]
        x = tl.load(base, mask=(rows[:, None] < N) & cm, other=0.0).to(tl.float32)
        sq += tl.sum(x * x, axis=1)
        if DOMINANT:
            s = tl.load(s_ptr + cols, mask=cols < D, other=0.0)
            dot_a += tl.sum(x * s[None, :], axis=1)
            sq_a += tl.sum(s * s, axis=0)
        else:
            # neighbour rows are mostly this program's own rows: re-reads hit L1/L2, not HBM
            nxt = tl.load(base + stride, mask=(rows[:, None] + 1 < N) & cm, other=0.0)
            prv = tl.load(
                base - stride, mask=(rows[:, None] >= 1) & (rows[:, None] < N + 1) & cm, other=0.0
            )
            nxt = nxt.to(tl.float32)
            prv = prv.to(tl.float32)
            dot_a += tl.sum(x * nxt, axis=1)
            sq_a += tl.sum(nxt * nxt, axis=1)
            dot_b += tl.sum(x * prv, axis=1)
            sq_b += tl.sum(prv * prv, axis=1)
    if DOMINANT:
        score = -_cos(dot_a, sq, sq_a, EPS)
    else:
        sim_next = tl.where(rows + 1 < N, _cos(dot_a, sq, sq_a, EPS), float("-inf"))
        sim_prev = tl.where(rows >= 1, _cos(dot_b, sq, sq_b, EPS), float("-inf"))
        score = -tl.maximum(sim_next, sim_prev)
    tl.store(out_ptr + rows, score, mask=rows < N)


@triton.jit
def _gather_rows(x_ptr, idx_ptr, out_ptr, D, stride_x, stride_out, BLOCK_D: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    src = tl.load(idx_ptr + row).to(tl.int64)
    v = tl.load(x_ptr + src * stride_x + cols, mask=cols < D)
    tl.store(out_ptr + row.to(tl.int64) * stride_out + cols, v, mask=cols < D)


def column_sum(tokens: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out[D] (float32) = tokens.sum(0), accumulated in float32, in a fixed order."""
    n, d = tokens.shape
    r = max(1, triton.cdiv(n, ROWS_PER_PARTIAL))
    partial = torch.empty((r, d), dtype=torch.float32, device=tokens.device)
    col_blocks = triton.cdiv(d, _BLOCK_D)
    _column_partials[(r, col_blocks)](
        tokens,
        partial,
        n,
        d,
        tokens.stride(0),
        ROWS=ROWS_PER_PARTIAL,
        BLOCK_N=_BLOCK_N,
        BLOCK_D=_BLOCK_D,
    )
    _column_finish[(col_blocks,)](partial, out, r, d, BLOCK_R=_BLOCK_R, BLOCK_D=_BLOCK_D)
    return out


def keep_scores(
    tokens: torch.Tensor, method: str, eps: float, out: torch.Tensor | None = None
) -> torch.Tensor:
    if tokens.stride(1) != 1:
        tokens = tokens.contiguous()
    n, d = tokens.shape
    out = torch.empty(n, dtype=torch.float32, device=tokens.device) if out is None else out
    dominant = method == "dominant"
    s = torch.empty(d if dominant else 1, dtype=torch.float32, device=tokens.device)
    if dominant:
        column_sum(tokens, s)
    _keep_scores[(triton.cdiv(n, _BLOCK_N),)](
        tokens,
        s,
        out,
        n,
        d,
        tokens.stride(0),
        DOMINANT=dominant,
        EPS=eps,
        BLOCK_N=_BLOCK_N,
        BLOCK_D=_BLOCK_D,
    )
    return out


def gather(
    tokens: torch.Tensor, index: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    if tokens.stride(1) != 1:
        tokens = tokens.contiguous()
    d = tokens.shape[1]
    if out is None:
        out = torch.empty((index.numel(), d), dtype=tokens.dtype, device=tokens.device)
    if index.numel():
        _gather_rows[(index.numel(), triton.cdiv(d, _BLOCK_D))](
            tokens, index, out, d, tokens.stride(0), out.stride(0), BLOCK_D=_BLOCK_D
        )
    return out
