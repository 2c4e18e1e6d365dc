"""Triton int8 KV quantization of every layer at once: each program owns one (layer, batch, head,
sequence block) tile, so the grid is layers x heads x sequence blocks and no program walks the
whole sequence.

Per-token value scales are local to a tile. Per-channel key scales need the maximum over the
whole sequence, i.e. across programs, and a launch is the only grid-wide barrier: launch 1
quantizes the values and folds each key tile's column maxima into a per-channel maximum with
atomic max (order-free, so deterministic); launch 2 quantizes the keys. Layers are separate
tensors (one per transformers cache layer); programs find theirs through a table of pointers,
so nothing is stacked or copied first. One kernel dequantizes keys and values of every layer.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _round_half_away(y):
    return tl.where(y >= 0, tl.floor(y + 0.5), tl.ceil(y - 0.5))


@triton.jit
def _quantize(x, scale):
    # div_rn: Triton's fp32 "/" is approximate on GPU; exact division keeps q equal to torch's.
    safe = tl.where(scale > 0, scale, 1.0)
    y = tl.where(scale > 0, tl.div_rn(x, safe + tl.zeros_like(x)), 0.0)
    return tl.minimum(tl.maximum(_round_half_away(y), -127.0), 127.0).to(tl.int8)


@triton.jit
def _tile(ptrs, first, layer, bh, H, rows, cols, S, Dh, sb, sh, ss, sd):
    """Load rows x cols of (layer, bh) as float32; `first` types the table's pointers."""
    base = tl.load(ptrs + layer).to(tl.pointer_type(first.dtype.element_ty))
    offs = (
        (bh // H).to(tl.int64) * sb
        + (bh % H).to(tl.int64) * sh
        + rows[:, None].to(tl.int64) * ss
        + cols[None, :] * sd
    )
    m = (rows[:, None] < S) & (cols[None, :] < Dh)
    return tl.load(base + offs, mask=m, other=0.0).to(tl.float32)


@triton.jit
def _values_and_key_amax(
    k_ptrs,
    k0,
    v_ptrs,
    v0,
    vq_ptr,
    vs_ptr,
    kmax_ptr,
    BH,
    H,
    S,
    Dh,
    ksb,
    ksh,
    kss,
    ksd,
    vsb,
    vsh,
    vss,
    vsd,
    BLOCK_S: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    layer = tl.program_id(0) // BH
    bh = tl.program_id(0) % BH
    lbh = tl.program_id(0).to(tl.int64)  # (layer, batch, head) row of the stacked outputs
    rows = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    cols = tl.arange(0, BLOCK_D)  # the whole head_dim
    k = _tile(k_ptrs, k0, layer, bh, H, rows, cols, S, Dh, ksb, ksh, kss, ksd)
    tl.atomic_max(kmax_ptr + lbh * Dh + cols, tl.max(tl.abs(k), axis=0), mask=cols < Dh)
    v = _tile(v_ptrs, v0, layer, bh, H, rows, cols, S, Dh, vsb, vsh, vss, vsd)
    scale = tl.div_rn(tl.max(tl.abs(v), axis=1), tl.zeros((BLOCK_S,), tl.float32) + 127.0)
    m = (rows[:, None] < S) & (cols[None, :] < Dh)
    tl.store(vs_ptr + lbh * S + rows, scale, mask=rows < S)
    tl.store(
        vq_ptr + (lbh * S + rows[:, None]) * Dh + cols[None, :],
        _quantize(v, scale[:, None]),
        mask=m,
    )


@triton.jit
def _keys(
    k_ptrs,
    k0,
    kq_ptr,
    ks_ptr,
    kmax_ptr,
    BH,
    H,
    S,
    Dh,
    ksb,
    ksh,
    kss,
    ksd,
    BLOCK_S: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    layer = tl.program_id(0) // BH
    bh = tl.program_id(0) % BH
    lbh = tl.program_id(0).to(tl.int64)
    rows = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    cols = tl.arange(0, BLOCK_D)
    amax = tl.load(kmax_ptr + lbh * Dh + cols, mask=cols < Dh, other=0.0)
    scale = tl.div_rn(amax, tl.zeros_like(amax) + 127.0)
    tl.store(ks_ptr + lbh * Dh + cols, scale, mask=(cols < Dh) & (tl.program_id(1) == 0))
    k = _tile(k_ptrs, k0, layer, bh, H, rows, cols, S, Dh, ksb, ksh, kss, ksd)
    m = (rows[:, None] < S) & (cols[None, :] < Dh)
    tl.store(
        kq_ptr + (lbh * S + rows[:, None]) * Dh + cols[None, :],
        _quantize(k, scale[None, :]),
        mask=m,
    )


@triton.jit
def _dequant(
    kq_ptr,
    vq_ptr,
    ks_ptr,
    vs_ptr,
    k_out,
    v_out,
    S,
    Dh,
    BLOCK_S: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    lbh = tl.program_id(0).to(tl.int64)
    rows = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    cols = tl.arange(0, BLOCK_D)
    m = (rows[:, None] < S) & (cols[None, :] < Dh)
    offs = (lbh * S + rows[:, None]) * Dh + cols[None, :]
    k_scale = tl.load(ks_ptr + lbh * Dh + cols, mask=cols < Dh, other=0.0)
    v_scale = tl.load(vs_ptr + lbh * S + rows, mask=rows < S, other=0.0)
    k = tl.load(kq_ptr + offs, mask=m, other=0).to(tl.float32) * k_scale[None, :]
    v = tl.load(vq_ptr + offs, mask=m, other=0).to(tl.float32) * v_scale[:, None]
    tl.store(k_out + offs, k.to(k_out.dtype.element_ty), mask=m)
    tl.store(v_out + offs, v.to(v_out.dtype.element_ty), mask=m)


def _blocks(s: int, dh: int) -> tuple[int, int]:
    block_d = triton.next_power_of_2(dh)
    return max(1, min(triton.next_power_of_2(s), 4096 // block_d)), block_d


def _same_strides(ts: list[torch.Tensor]) -> list[torch.Tensor]:
    # one set of strides serves every layer; a layer laid out differently is copied
    return ts if all(t.stride() == ts[0].stride() for t in ts) else [t.contiguous() for t in ts]


def _pointers(ts: list[torch.Tensor]) -> torch.Tensor:
    return torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64).to(ts[0].device)


def quantize(ks: list[torch.Tensor], vs: list[torch.Tensor]):
    """(k_q, v_q [L,B,H,S,Dh] int8, k_scale [L,B,H,Dh], v_scale [L,B,H,S] fp32): 3 launches
    (zeroing the key maxima, then the two kernels) for any number of layers."""
    ks, vs = _same_strides(ks), _same_strides(vs)
    n_layers, (b, h, s, dh), dev = len(ks), ks[0].shape, ks[0].device
    k_q = torch.empty((n_layers, b, h, s, dh), dtype=torch.int8, device=dev)
    v_q = torch.empty_like(k_q)
    k_max = torch.zeros((n_layers, b, h, dh), dtype=torch.float32, device=dev)
    k_scale = torch.empty_like(k_max)
    v_scale = torch.empty((n_layers, b, h, s), dtype=torch.float32, device=dev)
    if k_q.numel() == 0:
        return k_q, v_q, k_scale.zero_(), v_scale
    block_s, block_d = _blocks(s, dh)
    grid = (n_layers * b * h, triton.cdiv(s, block_s))
    k_ptrs, v_ptrs = _pointers(ks), _pointers(vs)
    _values_and_key_amax[grid](
        k_ptrs,
        ks[0],
        v_ptrs,
        vs[0],
        v_q,
        v_scale,
        k_max,
        b * h,
        h,
        s,
        dh,
        *ks[0].stride(),
        *vs[0].stride(),
        BLOCK_S=block_s,
        BLOCK_D=block_d,
    )
    _keys[grid](
        k_ptrs,
        ks[0],
        k_q,
        k_scale,
        k_max,
        b * h,
        h,
        s,
        dh,
        *ks[0].stride(),
        BLOCK_S=block_s,
        BLOCK_D=block_d,
    )
    return k_q, v_q, k_scale, v_scale


def dequantize(k_q, v_q, k_scale, v_scale, dtype: torch.dtype, out_k=None, out_v=None):
    """Keys and values of every layer in one launch; outputs have k_q's shape."""
    k = torch.empty(k_q.shape, dtype=dtype, device=k_q.device) if out_k is None else out_k
    v = torch.empty(v_q.shape, dtype=dtype, device=v_q.device) if out_v is None else out_v
    if k_q.numel() == 0:
        return k, v
    s, dh = k_q.shape[-2:]
    block_s, block_d = _blocks(s, dh)
    grid = (k_q.numel() // (s * dh), triton.cdiv(s, block_s))
    _dequant[grid](k_q, v_q, k_scale, v_scale, k, v, s, dh, BLOCK_S=block_s, BLOCK_D=block_d)
    return k, v
