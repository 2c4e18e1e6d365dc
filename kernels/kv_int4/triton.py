"""Triton decode attention over 4-bit KV, dequantization fused in (KIVI layout, reference.py).

One program per (batch, query head) walks its KV head's tokens one key group (G tokens) at a time:
it loads the packed bytes, unpacks the nibbles, applies the group's per-channel key scale/minimum
and each token's per-channel-group value scale/minimum in registers, and folds the scores into an
online softmax; then the full-precision residual tokens the same way. The fp KV is never written
to memory: a decode step reads ~0.28x the bytes of a bf16 cache (G = 64).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _nibbles(ptr, rows, cols, row_mask, col_mask, half: tl.constexpr):
    byte = tl.load(
        ptr + rows[:, None].to(tl.int64) * half + cols[None, :] // 2,
        mask=row_mask[:, None] & col_mask[None, :],
        other=0,
    ).to(tl.int32)
    return ((byte >> ((cols[None, :] % 2) * 4)) & 15).to(tl.float32)


@triton.jit
def _online(s, v, m_i, l_i, acc):
    m_new = tl.maximum(m_i, tl.max(s, axis=0))
    alpha = tl.exp(m_i - m_new)
    p = tl.exp(s - m_new)
    acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
    return m_new, l_i * alpha + tl.sum(p, axis=0), acc


@triton.jit
def _int4_decode_attention(
    q_ptr,
    kp_ptr,
    ks_ptr,
    km_ptr,
    vp_ptr,
    vs_ptr,
    vm_ptr,
    kr_ptr,
    vr_ptr,
    out_ptr,
    scale,
    HQ,
    HKV,
    N,
    R,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    G: tl.constexpr,
    GV: tl.constexpr,
    BLOCK_R: tl.constexpr,
):
    pid = tl.program_id(0)
    b = pid // HQ
    hk = (pid % HQ) // (HQ // HKV)
    bk = (b * HKV + hk).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    cm = cols < D
    q = tl.load(q_ptr + pid.to(tl.int64) * D + cols, mask=cm, other=0.0).to(tl.float32) * scale
    m_i = tl.zeros([1], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([1], dtype=tl.float32)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    g_rows = tl.arange(0, G)
    all_rows = g_rows < G
    for start in range(0, N, G):
        rows = bk * N + start + g_rows
        grp = bk * (N // G) + start // G
        k_sc = tl.load(ks_ptr + grp * D + cols, mask=cm, other=0.0).to(tl.float32)
        k_mn = tl.load(km_ptr + grp * D + cols, mask=cm, other=0.0).to(tl.float32)
        k = _nibbles(kp_ptr, rows, cols, all_rows, cm, D // 2) * k_sc[None, :] + k_mn[None, :]
        s = tl.sum(k * q[None, :], axis=1)
        v_off = rows[:, None] * (D // GV) + cols[None, :] // GV
        v_sc = tl.load(vs_ptr + v_off, mask=cm[None, :], other=0.0).to(tl.float32)
        v_mn = tl.load(vm_ptr + v_off, mask=cm[None, :], other=0.0).to(tl.float32)
        v = _nibbles(vp_ptr, rows, cols, all_rows, cm, D // 2) * v_sc + v_mn
        m_i, l_i, acc = _online(s, v, m_i, l_i, acc)
    r_rows = tl.arange(0, BLOCK_R)
    for start in range(0, R, BLOCK_R):
        rr = start + r_rows
        rm = rr < R
        off = (bk * R + rr[:, None]) * D + cols[None, :]
        m = rm[:, None] & cm[None, :]
        k = tl.load(kr_ptr + off, mask=m, other=0.0).to(tl.float32)
        s = tl.where(rm, tl.sum(k * q[None, :], axis=1), -float("inf"))
        v = tl.load(vr_ptr + off, mask=m, other=0.0).to(tl.float32)
        m_i, l_i, acc = _online(s, v, m_i, l_i, acc)
    tl.store(out_ptr + pid.to(tl.int64) * D + cols, acc / l_i, mask=cm)


def attention(
    q: torch.Tensor, parts: tuple[torch.Tensor, ...], group_size: int, scale: float
) -> torch.Tensor:
    """[batch, q_heads, head_dim] in q's dtype; see reference.attention."""
    kp, ks, km, vp, vs, vm, kr, vr = (t.contiguous() for t in parts)
    b, hq, d = q.shape
    hkv, n, r = kp.shape[1], kp.shape[2], kr.shape[2]
    out = torch.empty((b, hq, d), dtype=torch.float32, device=q.device)
    _int4_decode_attention[(b * hq,)](
        q.contiguous(),
        kp,
        ks,
        km,
        vp,
        vs,
        vm,
        kr,
        vr,
        out,
        float(scale),
        hq,
        hkv,
        n,
        r,
        D=d,
        BLOCK_D=triton.next_power_of_2(d),
        G=group_size,
        GV=min(group_size, d),
        BLOCK_R=max(16, min(64, triton.next_power_of_2(max(r, 1)))),
    )
    return out.to(q.dtype)
