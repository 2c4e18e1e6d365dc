"""The one device picker (and the dtype that goes with it) every model of the process uses."""

from __future__ import annotations

from typing import Any

from .errors import InputError

__all__ = ["pick_device", "pick_dtype"]

_DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
}


def pick_device(device: str = "auto") -> str:
    """'auto' -> 'cuda' when a GPU is visible, else 'cpu'; anything else is returned as given."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def pick_dtype(dtype: Any, device: str) -> Any:
    """A torch dtype: 'auto' is bf16 (fp16 without bf16 support) on CUDA and fp32 elsewhere."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        if str(device).startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if dtype not in _DTYPES:
        raise InputError(f"unknown dtype '{dtype}'; use auto, float32, bfloat16 or float16")
    return getattr(torch, _DTYPES[dtype])
