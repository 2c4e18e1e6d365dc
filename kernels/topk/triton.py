"""Triton similarity top-k: scores and block-local top-k fused, so the [Q, N] score matrix never
reaches HBM; only Q x (blocks * min(k, BLOCK_N)) candidates do, which torch.topk then merges.

Block-local selection sorts (score, index) pairs packed into one int64 key: the high 32 bits are
the float score mapped to an order-preserving int, the low 32 bits hold 2**31-1-index, so ties
prefer the lower index.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_Q = 16  # tl.dot needs >= 16 rows
BLOCK_N = 128
BLOCK_D = 64


@triton.jit
def _similarity_block_topk(
    q_ptr,
    k_ptr,
    cs_ptr,
    ci_ptr,
    Q,
    N,
    D,
    s_q,
    s_k,
    n_cand,
    KC,
    NORMALIZE: tl.constexpr,
    EPS: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    qs = tl.program_id(0) * BLOCK_Q + tl.arange(0, BLOCK_Q)
    ks = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_Q, BLOCK_N), dtype=tl.float32)
    q_sq = tl.zeros((BLOCK_Q,), dtype=tl.float32)
    k_sq = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for d0 in range(0, D, BLOCK_D):
        ds = d0 + tl.arange(0, BLOCK_D)
        q = tl.load(
            q_ptr + qs[:, None].to(tl.int64) * s_q + ds[None, :],
            mask=(qs[:, None] < Q) & (ds[None, :] < D),
            other=0.0,
        )
        kt = tl.load(
            k_ptr + ks[None, :].to(tl.int64) * s_k + ds[:, None],
            mask=(ks[None, :] < N) & (ds[:, None] < D),
            other=0.0,
        )
        # fp32 products for every input dtype: retrieval has few queries, so the kernel is bound
        # by reading keys, not by math, and fp32 keeps the ranking equal to the fp32 reference
        qf = q.to(tl.float32)
        kf = kt.to(tl.float32)
        acc += tl.dot(qf, kf, input_precision="ieee")
        if NORMALIZE:
            q_sq += tl.sum(qf * qf, axis=1)
            k_sq += tl.sum(kf * kf, axis=0)
    if NORMALIZE:
        q_norm = tl.maximum(tl.sqrt(q_sq), EPS)
        k_norm = tl.maximum(tl.sqrt(k_sq), EPS)
        acc = acc / (q_norm[:, None] * k_norm[None, :])
    acc = tl.where(ks[None, :] < N, acc, float("-inf"))
    bits = acc.to(tl.int32, bitcast=True)
    ordered = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)  # float order as signed-int order
    low = (0x7FFFFFFF - ks).to(tl.int64)  # larger for lower index: ties keep the earlier key
    packed = (ordered.to(tl.int64) << 32) | low[None, :]
    packed = tl.sort(packed, dim=1, descending=True)
    key = (packed >> 32).to(tl.int32)
    score = tl.where(key >= 0, key, key ^ 0x7FFFFFFF).to(tl.float32, bitcast=True)
    index = 0x7FFFFFFF - (packed & 0x7FFFFFFF)
    slot = tl.arange(0, BLOCK_N)
    dst = qs[:, None].to(tl.int64) * n_cand + tl.program_id(1) * KC + slot[None, :]
    m = (qs[:, None] < Q) & (slot[None, :] < KC)
    tl.store(cs_ptr + dst, score, mask=m)
    tl.store(ci_ptr + dst, index, mask=m)


def similarity_topk(
    queries: torch.Tensor,
    keys: torch.Tensor,
    k: int,
    normalize: bool,
    eps: float,
    block_n: int = BLOCK_N,
    out_candidates=None,
):
    queries = queries if queries.stride(1) == 1 else queries.contiguous()
    keys = keys if keys.stride(1) == 1 else keys.contiguous()
    (nq, d), n = queries.shape, keys.shape[0]
    blocks = triton.cdiv(n, block_n)
    kc = min(k, block_n)  # with k >= block_n every key of a block is a candidate
    if out_candidates is None:
        cand_s = torch.empty((nq, blocks * kc), dtype=torch.float32, device=keys.device)
        cand_i = torch.empty((nq, blocks * kc), dtype=torch.int64, device=keys.device)
    else:
        cand_s, cand_i = out_candidates
    _similarity_block_topk[(triton.cdiv(nq, BLOCK_Q), blocks)](
        queries,
        keys,
        cand_s,
        cand_i,
        nq,
        n,
        d,
        queries.stride(0),
        keys.stride(0),
        blocks * kc,
        KC=kc,
        NORMALIZE=normalize,
        EPS=eps,
        BLOCK_Q=BLOCK_Q,
        BLOCK_N=block_n,
        BLOCK_D=BLOCK_D,
    )
    # padded keys past N score -inf, so they lose to every real key in the merge
    top_s, where = torch.topk(cand_s, k, dim=1)
    return top_s, torch.gather(cand_i, 1, where)
