"""Kernel tests run real Triton on a GPU, and the Triton interpreter on CPU.

TRITON_INTERPRET is read when kernels are decorated, so it is set here, before any test module
imports triton, and only when no GPU is present (on a GPU the compiled kernels are what we test).
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
