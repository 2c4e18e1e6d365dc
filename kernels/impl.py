"""Chooses between a Triton kernel and its torch reference.

The choice follows the tensors' device, never symbols swapped at import time, so importing
`cascade.kernels` never imports triton and a CPU-only process pays nothing for it. Whether triton
is installed is looked up once per process (a `find_spec` costs ~36 us); what remains per call is
a device check. Hot paths choose once and keep the function (`patch_rmsnorm` does, per module).
"""

from __future__ import annotations

import functools
import importlib.util
import os

import torch

IMPLS = ("auto", "triton", "torch")


@functools.cache
def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


def interpreter_enabled() -> bool:
    # Triton (>= 3.8) reads this when triton itself is first imported, so it must be set before
    # anything imports triton, normally before the process starts.
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def choose_impl(impl: str, *tensors: torch.Tensor) -> str:
    """Return "triton" or "torch" for `impl` in IMPLS, given the tensors the op will read."""
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
    if impl == "torch":
        return "torch"
    on_cuda = all(t.is_cuda for t in tensors)
    if impl == "auto":
        return "triton" if on_cuda and triton_available() else "torch"
    if not triton_available():
        raise RuntimeError("impl='triton' was requested but triton is not installed")
    if not on_cuda and not interpreter_enabled():
        devices = sorted({str(t.device) for t in tensors})
        raise RuntimeError(
            f"impl='triton' needs CUDA tensors (got {', '.join(devices)}); to run Triton on CPU "
            "set TRITON_INTERPRET=1 before triton is first imported, or use impl='torch'/'auto'"
        )
    return "triton"


def check_float(name: str, t: torch.Tensor) -> None:
    if t.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"{name} must be float16, bfloat16 or float32, got {t.dtype}")
