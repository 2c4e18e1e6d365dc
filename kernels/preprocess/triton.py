"""Triton kernel for patch extraction: reads each uint8 pixel once, writes each patch row once.

One program per (image row, block of BLOCK_W pixels): lane i handles pixel i of the block, so a
warp's loads of one channel span consecutive pixels of one row (stride 3 bytes in HWC: the three
channel loads share the same cache lines) and only the row's last block has masked lanes. Each
pixel's value goes to its patch row at (channel, time, patch_y, patch_x); consecutive pixels land
on consecutive floats within a patch (runs of patch_size), repeated for the time copies.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

MAX_BLOCK_W = 512


@triton.jit
def _patchify_normalize(
    pix_ptr,
    mean_ptr,
    std_ptr,
    out_ptr,
    W,
    s_h,
    s_w,
    s_c,
    out_row_stride,
    blocks_w,
    PS: tl.constexpr,
    T: tl.constexpr,
    M: tl.constexpr,
    C: tl.constexpr,
    BLOCK_W: tl.constexpr,
):
    y = tl.program_id(0)
    xs = tl.program_id(1) * BLOCK_W + tl.arange(0, BLOCK_W)
    valid = xs < W
    gy, py = y // PS, y % PS
    gx, px = xs // PS, xs % PS
    # output row: patches ordered (block_h, block_w, merge_h, merge_w), as Qwen2-VL merges 2x2
    n = ((gy // M) * blocks_w + gx // M) * (M * M) + (gy % M) * M + gx % M
    row = out_ptr + n.to(tl.int64) * out_row_stride + py * PS + px
    src = pix_ptr + y.to(tl.int64) * s_h + xs.to(tl.int64) * s_w
    for c in tl.static_range(C):
        x = tl.load(src + c * s_c, mask=valid, other=0).to(tl.float32)
        # div_rn: Triton's default fp32 "/" is approximate on GPU; transformers divides exactly.
        v = tl.div_rn(x - tl.load(mean_ptr + c), tl.zeros_like(x) + tl.load(std_ptr + c))
        for t in tl.static_range(T):  # stills are repeated in time: write every copy
            tl.store(row + (c * T + t) * (PS * PS), v, mask=valid)


def patchify_normalize(
    pixels: torch.Tensor,
    mean_t: torch.Tensor,
    std_t: torch.Tensor,
    patch_size: int,
    temporal_patch_size: int,
    merge_size: int,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    h, w, c = pixels.shape
    gh, gw = h // patch_size, w // patch_size
    shape = (gh * gw, c * temporal_patch_size * patch_size * patch_size)
    if out is None:
        out = torch.empty(shape, dtype=torch.float32, device=pixels.device)
    elif out.shape != shape or out.dtype != torch.float32 or out.stride(1) != 1:
        raise ValueError(f"out must be float32 {shape} with contiguous rows")
    block_w = min(triton.next_power_of_2(w), MAX_BLOCK_W)
    _patchify_normalize[(h, triton.cdiv(w, block_w))](
        pixels,
        mean_t,
        std_t,
        out,
        w,
        pixels.stride(0),
        pixels.stride(1),
        pixels.stride(2),
        out.stride(0),
        gw // merge_size,
        PS=patch_size,
        T=temporal_patch_size,
        M=merge_size,
        C=c,
        BLOCK_W=block_w,
    )
    return out
