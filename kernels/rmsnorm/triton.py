"""Triton RMSNorm: one program per row, one HBM read of the input and one write of the output."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

MAX_D = 65536  # a whole row lives in registers/SRAM; wider rows would spill


@triton.jit
def _rms_norm(x_ptr, w_ptr, y_ptr, D, eps, s_x, s_y, BLOCK_D: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    m = cols < D
    x = tl.load(x_ptr + row * s_x + cols, mask=m, other=0.0)
    xf = x.to(tl.float32)
    inv = 1.0 / tl.sqrt(tl.sum(xf * xf, axis=0) / D + eps)
    # round to the input dtype before the weight multiply, as Qwen2RMSNorm does
    n = (xf * inv).to(x.dtype).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * s_y + cols, (n * w).to(y_ptr.dtype.element_ty), mask=m)


def _rows(t: torch.Tensor) -> torch.Tensor:
    t2 = t.reshape(-1, t.shape[-1])  # a view when possible, else a copy
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor, eps: float, out: torch.Tensor | None = None
) -> torch.Tensor:
    d = x.shape[-1]
    if d > MAX_D:
        raise ValueError(f"the Triton RMSNorm keeps a row in one block; D={d} > {MAX_D}")
    x2 = _rows(x)
    y = (
        out
        if out is not None
        else torch.empty(x.shape, dtype=torch.promote_types(x.dtype, weight.dtype), device=x.device)
    )
    y2 = y.view(-1, d)
    if x2.shape[0]:
        _rms_norm[(x2.shape[0],)](
            x2,
            weight.contiguous(),
            y2,
            d,
            eps,
            x2.stride(0),
            y2.stride(0),
            BLOCK_D=triton.next_power_of_2(d),
        )
    return y
