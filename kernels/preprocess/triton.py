"""Triton kernel for patch extraction: reads each uint8 pixel once, writes each patch row once."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _patchify_normalize(pix_ptr, mean_ptr, std_ptr, out_ptr, s_h, s_w, s_c, out_row_stride,
                        blocks_w, PS: tl.constexpr, T: tl.constexpr, M: tl.constexpr,
                        C: tl.constexpr, BLOCK: tl.constexpr):
    n = tl.program_id(0)  # one program per output row (= one patch)
    mw = n % M
    mh = (n // M) % M
    bw = (n // (M * M)) % blocks_w
    bh = n // (M * M * blocks_w)
    h0 = (bh * M + mh) * PS
    w0 = (bw * M + mw) * PS
    j = tl.arange(0, BLOCK)  # flat (channel, patch_y, patch_x)
    valid = j < C * PS * PS
    c = j // (PS * PS)
    py = (j // PS) % PS
    px = j % PS
    x = tl.load(pix_ptr + (h0 + py) * s_h + (w0 + px) * s_w + c * s_c, mask=valid, other=0)
    mean = tl.load(mean_ptr + c, mask=valid, other=0.0)
    std = tl.load(std_ptr + c, mask=valid, other=1.0)
    # div_rn: Triton's default fp32 "/" is approximate on GPU; transformers divides exactly.
    y = tl.div_rn(x.to(tl.float32) - mean, std)
    row = out_ptr + n.to(tl.int64) * out_row_stride
    for t in tl.static_range(T):  # stills are repeated in time; write every copy from registers
        tl.store(row + c * (T * PS * PS) + t * (PS * PS) + py * PS + px, y, mask=valid)


def patchify_normalize(pixels: torch.Tensor, mean_t: torch.Tensor, std_t: torch.Tensor,
                       patch_size: int, temporal_patch_size: int, merge_size: int,
                       out: torch.Tensor | None = None) -> torch.Tensor:
    h, w, c = pixels.shape
    gh, gw = h // patch_size, w // patch_size
    shape = (gh * gw, c * temporal_patch_size * patch_size * patch_size)
    if out is None:
        out = torch.empty(shape, dtype=torch.float32, device=pixels.device)
    elif out.shape != shape or out.dtype != torch.float32 or out.stride(1) != 1:
        raise ValueError(f"out must be float32 {shape} with contiguous rows")
    _patchify_normalize[(gh * gw,)](
        pixels, mean_t, std_t, out, pixels.stride(0), pixels.stride(1), pixels.stride(2),
        out.stride(0), gw // merge_size, PS=patch_size, T=temporal_patch_size, M=merge_size, C=c,
        BLOCK=triton.next_power_of_2(c * patch_size * patch_size))
    return out
