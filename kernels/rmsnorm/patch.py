"""Swap the forward of a model's RMSNorm modules for `rms_norm` (Liger-Kernel style), reversibly.

The implementation (Triton launcher or torch reference) is chosen once per module when patching,
from the module's weight device: a decode step calls ~2 norms per layer, and choosing per call
would put the dispatch on the host's critical path every time.

Candidates are modules whose class name ends in "RMSNorm" with a 1-D `weight` and an epsilon
(`variance_epsilon` or `eps`). A name is not a contract (Gemma's RMSNorm scales by 1 + weight), so
each candidate class is probed once: its own forward and ours must agree on a random input, or the
class is left alone and listed in `handle.skipped`.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

_MISSING = object()


def _epsilon(module: nn.Module):
    for name in ("variance_epsilon", "eps"):
        value = getattr(module, name, None)
        if isinstance(value, float):
            return value
    return None


def _agrees(module: nn.Module, eps: float) -> bool:
    from . import reference

    w = cast(torch.Tensor, module.weight)  # a Parameter; nn.Module types attributes loosely
    gen = torch.Generator(device=w.device).manual_seed(0)
    x = torch.randn(3, w.shape[0], generator=gen, device=w.device).to(w.dtype)
    with torch.no_grad():
        theirs = module(x)
        ours = reference.rms_norm(x, w, eps)
    return (
        isinstance(theirs, torch.Tensor)
        and theirs.shape == ours.shape
        and theirs.dtype == ours.dtype
        and torch.allclose(theirs, ours, rtol=1e-2, atol=1e-2)
    )


class RMSNormPatch:
    """Handle returned by `patch_rmsnorm`; `undo()` (or leaving a `with` block) restores."""

    def __init__(self) -> None:
        self.patched: list[nn.Module] = []
        self.skipped: dict[str, str] = {}  # class name -> why it was left alone
        self._saved: list[tuple[nn.Module, Any]] = []  # (module, its own forward or _MISSING)

    def undo(self) -> None:
        for module, old in reversed(self._saved):
            if old is _MISSING:
                module.__dict__.pop("forward", None)
            else:
                module.forward = old
        self._saved.clear()
        self.patched.clear()

    def __enter__(self) -> RMSNormPatch:
        return self

    def __exit__(self, *exc) -> None:
        self.undo()


def _implementation(impl: str, weight: torch.Tensor):
    """The module (Triton launcher or torch reference) whose `rms_norm` the patched forward
    calls."""
    from ..impl import choose_impl
    from . import reference

    if choose_impl(impl, weight) == "triton":
        from . import triton as kernel

        return kernel
    return reference


def patch_rmsnorm(model: nn.Module, impl: str = "auto") -> RMSNormPatch:
    handle = RMSNormPatch()
    verdict: dict[type, bool] = {}
    for module in model.modules():
        cls = type(module)
        eps = _epsilon(module)
        weight = getattr(module, "weight", None)
        if not cls.__name__.endswith("RMSNorm"):
            continue
        if eps is None or not isinstance(weight, torch.Tensor) or weight.ndim != 1:
            handle.skipped[cls.__name__] = "no 1-D weight or no float variance_epsilon/eps"
            continue
        if cls not in verdict:
            verdict[cls] = _agrees(module, eps)
        if not verdict[cls]:
            handle.skipped[cls.__name__] = "its forward differs from Qwen2RMSNorm numerics"
            continue

        # The defaults bind this module's weight, eps and launcher now, once per patched class.
        def forward(hidden_states, _m=module, _eps=eps, _impl=_implementation(impl, weight)):  # noqa: B008
            return _impl.rms_norm(hidden_states, _m.weight, _eps)

        handle._saved.append((module, module.__dict__.get("forward", _MISSING)))
        module.forward = forward  # an instance attribute shadows the class's forward
        handle.patched.append(module)
    return handle
