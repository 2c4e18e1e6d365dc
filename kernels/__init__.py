"""Fused Triton kernels, each paired with a plain-torch reference (the spec and the CPU path).

Every op takes impl="auto"|"triton"|"torch"; "auto" runs Triton for CUDA tensors when triton is
installed and the torch reference otherwise. Importing this package never imports triton.
"""

from .kv_quant import QuantizedKV, dequantize_kv, quantize_kv
from .preprocess import patchify_normalize
from .prune import score_and_gather
from .rmsnorm import patch_rmsnorm, rms_norm
from .topk import similarity_topk

__all__ = [
    "QuantizedKV",
    "dequantize_kv",
    "patch_rmsnorm",
    "patchify_normalize",
    "quantize_kv",
    "rms_norm",
    "score_and_gather",
    "similarity_topk",
]
