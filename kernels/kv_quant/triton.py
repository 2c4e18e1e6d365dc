"""Triton int8 KV quantization. Keys (per-channel scales) need a reduction over seq, so their
kernel walks seq twice (amax, then quantize; the second read mostly hits L2); values (per-token
scales) are quantized in one pass. One generic kernel dequantizes both through scale strides."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _round_half_away(y):
    return tl.where(y >= 0, tl.floor(y + 0.5), tl.ceil(y - 0.5))


@triton.jit
def _quant_per_channel(x_ptr, q_ptr, scale_ptr, H, S, Dh, sb, sh, ss, sd,
                       BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    bh = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    base = x_ptr + (bh // H).to(tl.int64) * sb + (bh % H).to(tl.int64) * sh + cols[None, :] * sd
    qbase = q_ptr + bh.to(tl.int64) * S * Dh + cols[None, :]
    amax = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for s0 in range(0, S, BLOCK_S):
        rows = s0 + tl.arange(0, BLOCK_S)
        m = (rows[:, None] < S) & (cols[None, :] < Dh)
        x = tl.load(base + rows[:, None].to(tl.int64) * ss, mask=m, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.max(tl.abs(x), axis=0))
    # div_rn: Triton's fp32 "/" is approximate on GPU; exact division keeps q equal to torch's.
    scale = tl.div_rn(amax, tl.zeros_like(amax) + 127.0)
    safe = tl.where(scale > 0, scale, 1.0)
    tl.store(scale_ptr + bh.to(tl.int64) * Dh + cols, scale, mask=cols < Dh)
    for s0 in range(0, S, BLOCK_S):
        rows = s0 + tl.arange(0, BLOCK_S)
        m = (rows[:, None] < S) & (cols[None, :] < Dh)
        x = tl.load(base + rows[:, None].to(tl.int64) * ss, mask=m, other=0.0).to(tl.float32)
        y = tl.where(scale[None, :] > 0, tl.div_rn(x, safe[None, :] + tl.zeros_like(x)), 0.0)
        q = tl.minimum(tl.maximum(_round_half_away(y), -127.0), 127.0).to(tl.int8)
        tl.store(qbase + rows[:, None].to(tl.int64) * Dh, q, mask=m)


@triton.jit
def _quant_per_token(x_ptr, q_ptr, scale_ptr, H, S, Dh, sb, sh, ss, sd,
                     BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    bh = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    cols = tl.arange(0, BLOCK_D)  # the whole head_dim: the reduction axis
    m = (rows[:, None] < S) & (cols[None, :] < Dh)
    base = x_ptr + (bh // H).to(tl.int64) * sb + (bh % H).to(tl.int64) * sh
    x = tl.load(base + rows[:, None].to(tl.int64) * ss + cols[None, :] * sd, mask=m,
                other=0.0).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=1)
    scale = tl.div_rn(amax, tl.zeros_like(amax) + 127.0)
    safe = tl.where(scale > 0, scale, 1.0)
    y = tl.where(scale[:, None] > 0, tl.div_rn(x, safe[:, None] + tl.zeros_like(x)), 0.0)
    q = tl.minimum(tl.maximum(_round_half_away(y), -127.0), 127.0).to(tl.int8)
    tl.store(scale_ptr + bh.to(tl.int64) * S + rows, scale, mask=rows < S)
    tl.store(q_ptr + bh.to(tl.int64) * S * Dh + rows[:, None] * Dh + cols[None, :], q, mask=m)


@triton.jit
def _dequant(q_ptr, scale_ptr, out_ptr, S, Dh, scale_bh, scale_s, scale_d,
             BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)
    rows = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    cols = tl.arange(0, BLOCK_D)
    m = (rows[:, None] < S) & (cols[None, :] < Dh)
    offs = bh * S * Dh + rows[:, None] * Dh + cols[None, :]
    q = tl.load(q_ptr + offs, mask=m, other=0).to(tl.float32)
    # the scale broadcasts over seq (keys) or head_dim (values) through a zero stride
    s = tl.load(scale_ptr + bh * scale_bh + rows[:, None] * scale_s + cols[None, :] * scale_d,
                mask=m, other=0.0)
    tl.store(out_ptr + offs, (q * s).to(out_ptr.dtype.element_ty), mask=m)


def _blocks(s: int, dh: int) -> tuple[int, int]:
    block_d = triton.next_power_of_2(dh)
    return max(1, min(triton.next_power_of_2(s), 4096 // block_d)), block_d


def quantize(k: torch.Tensor, v: torch.Tensor):
    b, h, s, dh = k.shape
    dev = k.device
    k_q = torch.empty((b, h, s, dh), dtype=torch.int8, device=dev)
    v_q = torch.empty_like(k_q)
    k_scale = torch.empty((b, h, dh), dtype=torch.float32, device=dev)
    v_scale = torch.empty((b, h, s), dtype=torch.float32, device=dev)
    if k.numel() == 0:
        return k_q, v_q, k_scale.zero_(), v_scale
    block_s, block_d = _blocks(s, dh)
    kd = min(block_d, 64)  # split head_dim across programs: more parallelism for the seq walk
    _quant_per_channel[(b * h, triton.cdiv(dh, kd))](
        k, k_q, k_scale, h, s, dh, *k.stride(), BLOCK_S=max(1, min(block_s, 4096 // kd)),
        BLOCK_D=kd)
    _quant_per_token[(b * h, triton.cdiv(s, block_s))](
        v, v_q, v_scale, h, s, dh, *v.stride(), BLOCK_S=block_s, BLOCK_D=block_d)
    return k_q, v_q, k_scale, v_scale


def dequantize(k_q, v_q, k_scale, v_scale, dtype: torch.dtype, out_k=None, out_v=None):
    b, h, s, dh = k_q.shape
    k = torch.empty(k_q.shape, dtype=dtype, device=k_q.device) if out_k is None else out_k
    v = torch.empty(v_q.shape, dtype=dtype, device=v_q.device) if out_v is None else out_v
    if k_q.numel() == 0:
        return k, v
    block_s, block_d = _blocks(s, dh)
    grid = (b * h, triton.cdiv(s, block_s))
    _dequant[grid](k_q, k_scale, k, s, dh, dh, 0, 1, BLOCK_S=block_s, BLOCK_D=block_d)
    _dequant[grid](v_q, v_scale, v, s, dh, s, 1, 0, BLOCK_S=block_s, BLOCK_D=block_d)
    return k, v
