import pytest
import torch
from torch import nn
from transformers import Qwen2Config, Qwen2ForCausalLM
from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm

from cascade.kernels.rmsnorm import patch_rmsnorm, reference, rms_norm

from ._kernel_helpers import (
    DEVICE,
    FLOAT_DTYPES,
    TOL,
    assert_close_first_mismatch,
    gpu,
    needs_gpu,
    poisoned,
)


def _rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype).to(DEVICE)


def test_reference_is_qwen2_rmsnorm():
    norm = Qwen2RMSNorm(48, eps=1e-5)
    nn.init.normal_(norm.weight)
    x = _rand(3, 48, dtype=torch.bfloat16).cpu()  # bf16 input, fp32 weight: fp32 result
    with torch.no_grad():
        assert_close_first_mismatch(reference.rms_norm(x, norm.weight, 1e-5), norm(x), what="y")


# D=1 and D=100 leave a masked tail in the block; (3, 5, 100) flattens leading dims.
@pytest.mark.parametrize("shape", [(1, 1), (3, 5, 100), (2, 256)])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_triton_matches_reference(shape, dtype):
    from cascade.kernels.rmsnorm import triton as kernel

    x, w = _rand(*shape, dtype=dtype), _rand(shape[-1], dtype=dtype, seed=1)
    out = poisoned(shape, dtype)
    got = kernel.rms_norm(x, w, 1e-6, out=out)
    assert got is out
    assert_close_first_mismatch(got, reference.rms_norm(x, w, 1e-6), *TOL[dtype], what="y")


def test_mixed_dtypes_promote_like_qwen2():
    x, w = _rand(4, 40, dtype=torch.float16), _rand(40, seed=1)
    got = rms_norm(x, w, impl="triton")
    assert got.dtype == torch.float32
    assert_close_first_mismatch(got, rms_norm(x, w, impl="torch"), 1e-5, 1e-6, what="y")


def test_patch_tiny_qwen2():
    torch.manual_seed(0)
    cfg = Qwen2Config(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        vocab_size=256,
    )
    model = Qwen2ForCausalLM(cfg).to(DEVICE).eval()
    for m in model.modules():  # random norm weights, so a wrong weight use cannot hide
        if isinstance(m, Qwen2RMSNorm):
            nn.init.normal_(m.weight, 1.0, 0.2)
    ids = torch.randint(0, 256, (2, 7), generator=torch.Generator().manual_seed(1)).to(DEVICE)
    with torch.no_grad():
        before = model(ids).logits
        with patch_rmsnorm(model, impl="triton") as handle:
            assert len(handle.patched) == 2 * 2 + 1 and not handle.skipped
            patched = model(ids).logits
        after = model(ids).logits
    assert_close_first_mismatch(patched, before, 1e-4, 1e-5, what="patched logits")
    assert_close_first_mismatch(after, before, what="logits after undo")
    assert not any("forward" in vars(m) for m in model.modules())


def test_patched_forward_chooses_the_implementation_once(monkeypatch):
    from cascade.kernels import impl as _impl

    model = nn.Sequential(Qwen2RMSNorm(8), Qwen2RMSNorm(8)).to(DEVICE)
    x = _rand(3, 8)
    with patch_rmsnorm(model, impl="triton") as handle:
        assert len(handle.patched) == 2
        monkeypatch.setattr(_impl, "choose_impl", lambda *a: pytest.fail("chose per call"))
        with torch.no_grad():
            got = model(x)
    assert_close_first_mismatch(got, model(x).detach(), 1e-5, 1e-6, what="patched")


class _OnePlusRMSNorm(nn.Module):
    """Gemma-style: same attributes as Qwen2RMSNorm, different math."""

    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(d))
        self.eps = 1e-6

    def forward(self, x):
        return (1 + self.weight) * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def test_patch_skips_lookalike_norms():
    model = nn.Sequential(_OnePlusRMSNorm(8), Qwen2RMSNorm(8))
    handle = patch_rmsnorm(model, impl="torch")
    assert handle.patched == [model[1]]
    assert "_OnePlusRMSNorm" in handle.skipped
    handle.undo()
    handle.undo()  # idempotent
    assert "forward" not in vars(model[1])


@pytest.mark.parametrize(
    "args, error",
    [
        ((torch.zeros(2, 8), torch.ones(7)), ValueError),
        ((torch.zeros(2, 8, dtype=torch.int64), torch.ones(8)), TypeError),
    ],
)
def test_bad_input_is_a_clear_error(args, error):
    with pytest.raises(error):
        rms_norm(*args)


@gpu
def test_gpu_realistic():
    needs_gpu()
    x = torch.randn(4096, 3584, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(3584, device="cuda", dtype=torch.bfloat16)
    assert_close_first_mismatch(
        rms_norm(x, w, impl="triton"),
        rms_norm(x, w, impl="torch"),
        *TOL[torch.bfloat16],
        what="gpu rmsnorm",
    )
