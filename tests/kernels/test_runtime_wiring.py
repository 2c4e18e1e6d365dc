"""The VLM runtime's `kernels` switch: "triton" answers with the tokens of "torch", and really runs
the Triton kernels (preprocessing, RMSNorm, VisionZip scoring, int8 KV). On CPU the conftest sets
TRITON_INTERPRET=1, so "triton" runs the interpreter; on a GPU it runs the compiled kernels."""

from __future__ import annotations

import collections
import importlib
import os

import numpy as np
import pytest
import torch

from cascade.artifacts import Image
from cascade.vlm import VLM, ReductionConfig, build_tiny_vlm

from ._kernel_helpers import DEVICE

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# (op package, Triton launcher) that the runtime reaches through each op's public function.
pytestmark = pytest.mark.slow  # Triton interpreter + two tiny VLMs: minutes on a CPU

LAUNCHERS = [
    ("preprocess", "patchify_normalize"),
    ("rmsnorm", "rms_norm"),
    ("prune", "keep_scores"),
    ("kv_quant", "quantize"),
    ("kv_quant", "dequantize"),
]


def _image(seed: int, h: int, w: int) -> Image:
    rng = np.random.default_rng(seed)
    return Image((rng.random((h, w, 3)) * 255).astype(np.uint8), source=f"img{seed}")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return str(build_tiny_vlm(tmp_path_factory.mktemp("tiny"), size="test"))


@pytest.fixture(scope="module")
def vlms(tiny):
    """One float32 VLM per switch value, each with its own int8 prefix cache."""
    torch.set_num_threads(1)
    return {
        k: VLM.load(
            tiny, device=DEVICE, dtype="float32", kernels=k, kv_cache_bytes=64 << 20, kv_int8=True
        )
        for k in ("torch", "triton")
    }


@pytest.fixture
def launches(monkeypatch):
    """Counts calls of each Triton launcher."""
    counts: collections.Counter = collections.Counter()
    for op, fn in LAUNCHERS:
        module = importlib.import_module(f"cascade.kernels.{op}.triton")
        real = getattr(module, fn)

        def spy(*args, _real=real, _name=f"{op}.{fn}", **kwargs):
            counts[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, fn, spy)
    return counts


@pytest.mark.parametrize(
    "reduction", [None, ReductionConfig("visionzip", 0.25)], ids=["none", "visionzip"]
)
def test_triton_gives_the_tokens_of_torch(vlms, launches, reduction):
    img = _image(1, 60, 90)
    runs = {}
    for kernels, vlm in vlms.items():
        before = dict(launches)
        # miss (fp prefix), then a hit that rebuilds the prefix from the int8 entry
        miss = vlm.generate([img], "What is this?", max_new_tokens=6, reduction=reduction)
        hit = vlm.generate([img], "What is this?", max_new_tokens=6, reduction=reduction)
        assert (miss.bill.cache, hit.bill.cache) == ("miss", "hit")
        runs[kernels] = (miss.token_ids, hit.token_ids)
        used = {k for k, n in launches.items() if n > before.get(k, 0)}
        if kernels == "torch":
            assert not used, f"kernels='torch' launched Triton: {used}"
        else:
            expected = {
                "preprocess.patchify_normalize",
                "rmsnorm.rms_norm",
                "kv_quant.quantize",
                "kv_quant.dequantize",
            } | ({"prune.keep_scores"} if reduction else set())
            assert used == expected
    assert runs["triton"] == runs["torch"]
    assert vlms["triton"].backend.rmsnorm_patch.patched  # the decoder's norms, undoable
    assert vlms["torch"].backend.rmsnorm_patch is None


@pytest.mark.parametrize("kernels", ["torch", "triton"])
def test_preprocessing_equals_the_hf_processor(vlms, kernels):
    """Up- and downscaled, odd sizes, two images of one shape: the processor's exact outputs."""
    b = vlms[kernels].backend
    images = [_image(2, 20, 20), _image(3, 57, 113), _image(4, 300, 410), _image(5, 57, 113)]
    prefix, _ = b.layout.first_turn(len(images), None, "q")
    pil = [im.to_pil() for im in images]
    assert b.family.kernel_preprocessing
    ours = b.runtime.build_prefix(prefix, b.runtime.preprocess(pil))
    hf = b.processor(text=[prefix], images=pil, return_tensors="pt")
    assert torch.equal(ours.input_ids.cpu(), hf["input_ids"][0])
    assert torch.equal(ours.vision_inputs["image_grid_thw"].cpu(), hf["image_grid_thw"])
    assert torch.equal(ours.vision_inputs["pixel_values"].cpu(), hf["pixel_values"])


def test_preprocessing_honours_the_pixel_budget(tiny):
    vlm = VLM.load(
        tiny,
        device=DEVICE,
        dtype="float32",
        kernels="triton",
        min_pixels=28 * 28 * 9,
        max_pixels=28 * 28 * 16,
    )
    b = vlm.backend
    prefix, _ = b.layout.first_turn(2, None, "q")
    pil = [_image(7, 30, 40).to_pil(), _image(8, 200, 150).to_pil()]
    ours = b.runtime.build_prefix(prefix, b.runtime.preprocess(pil))
    size = {"shortest_edge": 28 * 28 * 9, "longest_edge": 28 * 28 * 16}
    hf = b.processor(text=[prefix], images=pil, size=size, return_tensors="pt")
    assert torch.equal(ours.input_ids.cpu(), hf["input_ids"][0])
    assert torch.equal(ours.vision_inputs["pixel_values"].cpu(), hf["pixel_values"])


def test_triton_on_cpu_without_interpreter_fails_at_load(tiny, monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("on a GPU host kernels='triton' runs on the GPU")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        VLM.load(tiny, device="cpu", kernels="triton")


def test_stage_passes_the_switch_through(tiny):
    from cascade.stages.vlm_answer import VLMAnswer

    st = VLMAnswer(
        {"max_new_tokens": 2}, models={"vlm": {"id": tiny, "device": "cpu", "kernels": "torch"}}
    )
    st(images=[_image(6, 40, 40)], question="What?")
    assert st.model("vlm").vlm.backend.ops.requested == "torch"
