"""impl= handling shared by every op (kernels/impl.py)."""

import subprocess
import sys

import pytest
import torch

import cascade.kernels as K
from cascade.kernels import impl as _impl
from cascade.kernels import kv_quant, preprocess, prune, rmsnorm, topk

from ._kernel_helpers import poisoned

CASES = {  # op call on small CPU inputs, and the reference function it must reach
    "patchify": (
        lambda impl: K.patchify_normalize(
            torch.zeros(28, 28, 3, dtype=torch.uint8), (0.5,) * 3, (0.5,) * 3, impl=impl
        ),
        preprocess.reference,
        "patchify_normalize",
    ),
    "prune": (
        lambda impl: K.score_and_gather(torch.randn(6, 4), 3, impl=impl),
        prune.reference,
        "keep_scores",
    ),
    "rmsnorm": (
        lambda impl: K.rms_norm(torch.randn(2, 4), torch.ones(4), impl=impl),
        rmsnorm.reference,
        "rms_norm",
    ),
    "kv_quant": (
        lambda impl: K.quantize_kv(torch.randn(1, 1, 2, 4), torch.randn(1, 1, 2, 4), impl=impl),
        kv_quant.reference,
        "quantize",
    ),
    "topk": (
        lambda impl: K.similarity_topk(torch.randn(1, 4), torch.randn(3, 4), 2, impl=impl),
        topk.reference,
        "similarity_topk",
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_auto_on_cpu_runs_the_reference(name, monkeypatch):
    call, module, fn = CASES[name]
    calls = []
    real = getattr(module, fn)
    monkeypatch.setattr(module, fn, lambda *a, **k: calls.append(1) or real(*a, **k))
    call("auto")
    assert calls, f"{name}: impl='auto' on CPU did not run the torch reference"


@pytest.mark.parametrize("name", CASES)
def test_triton_on_cpu_without_interpreter_is_a_clear_error(name, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        CASES[name][0]("triton")


@pytest.mark.parametrize("name", CASES)
def test_unknown_impl_is_a_clear_error(name):
    with pytest.raises(ValueError, match="impl must be one of"):
        CASES[name][0]("cuda")


def test_choose_impl():
    cpu = torch.zeros(1)
    assert _impl.choose_impl("auto", cpu) == "torch"
    assert _impl.choose_impl("torch", cpu) == "torch"


def test_triton_is_looked_up_once_per_process(monkeypatch):
    import importlib.util

    calls = []
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: calls.append(name) or real(name, *a)
    )
    _impl.triton_available.cache_clear()
    for _ in range(5):
        assert _impl.choose_impl("triton", torch.zeros(1)) == "triton"  # interpreter is on
    assert calls == ["triton"]


def test_dequantize_dispatch_on_cpu(monkeypatch):
    q = K.quantize_kv(torch.randn(1, 1, 2, 4), torch.randn(1, 1, 2, 4))
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert K.dequantize_kv(q)[0].shape == (1, 1, 2, 4)  # auto -> torch, no interpreter needed
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        K.dequantize_kv(q, impl="triton")


@pytest.mark.slow
def test_importing_the_package_does_not_import_triton():
    code = "import sys, cascade.kernels; sys.exit('triton' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_poisoned_helper_fails_unwritten_buffers():
    from ._kernel_helpers import assert_close_first_mismatch

    with pytest.raises(AssertionError, match=r"first at index \(1,\)"):
        assert_close_first_mismatch(torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0]))
    assert poisoned((2,), torch.int8, "cpu").tolist() == [-128, -128]
