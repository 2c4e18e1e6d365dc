"""Shared checks for kernel tests: per-dtype tolerances and a comparison that names the first
mismatching element, so a failing kernel points at the block/tail that broke."""

from __future__ import annotations

import pytest
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# (rtol, atol). bf16 allows about one ulp: besides summation order, the CPU interpreter rounds
# float32 -> bfloat16 differently from a GPU (it truncates or rounds ties up, not to even).
TOL = {torch.float32: (1e-5, 1e-6), torch.float16: (1e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2)}

gpu = pytest.mark.gpu


def needs_gpu() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")


def poisoned(shape, dtype, device=DEVICE) -> torch.Tensor:
    """An output buffer whose every element fails a comparison unless the kernel overwrites it."""
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.full(shape, torch.iinfo(dtype).min, dtype=dtype, device=device)


def assert_close_first_mismatch(
    actual: torch.Tensor,
    expected: torch.Tensor,
    rtol: float = 0.0,
    atol: float = 0.0,
    what: str = "",
) -> None:
    assert actual.shape == expected.shape, (
        f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    )
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    a, e = actual.detach().cpu(), expected.detach().cpu()
    if a.dtype.is_floating_point:
        a, e = a.double(), e.double()
        same = (a == e) | (a.isnan() & e.isnan())  # equal infinities and NaN where expected
        ok = same | ((a - e).abs() <= atol + rtol * e.abs())
    else:
        ok = a == e
    if not bool(ok.all()):
        bad = (~ok).nonzero()
        idx = tuple(bad[0].tolist())
        raise AssertionError(
            f"{what}: {bad.shape[0]} of {ok.numel()} elements differ (rtol={rtol}, atol={atol}); "
            f"first at index {idx}: got {actual[idx].item()!r}, expected {expected[idx].item()!r}"
        )
