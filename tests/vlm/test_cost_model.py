"""The cost model against the FLOPs torch itself counts on each family's real architecture.

`torch.utils.flop_counter.FlopCounterMode` counts every matmul, convolution and (eager) attention
product the model executes. With eager attention the vision tower computes exactly what the cost
model bills: patch embedding, blocks, full / windowed / per-tile attention and merger (DeepStack
mergers included). The language model's eager attention materializes the whole square score
matrix; the cost model bills the causal half a fused kernel computes, so there the dense part
must match exactly and attention be half the square.
"""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from cascade.cost import prefill_flops
from cascade.vlm import VLM

FAMILIES = ["tiny_path", "tiny_path_25", "tiny_path_qwen3", "tiny_path_idefics3"]


@pytest.mark.parametrize("fixture", FAMILIES)
def test_tower_flops_equal_the_counted_flops(request, fixture, make_image):
    vlm = VLM.load(str(request.getfixturevalue(fixture)), device="cpu", attn_implementation="eager")
    fam, rt = vlm.family, vlm.backend.runtime
    images = [make_image(1), make_image(2, 300, 60), make_image(3, 120, 90)]
    inputs = rt.collate(rt.preprocess([im.to_pil() for im in images]))
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        rt.encode(inputs)
    costs = [fam.image_cost(im.width, im.height) for im in images]
    assert fam.vision_flops(costs) == counter.get_total_flops()


@pytest.mark.parametrize("fixture", FAMILIES)
def test_prefill_flops_are_the_counted_matmuls_and_half_the_attention_square(request, fixture):
    vlm = VLM.load(str(request.getfixturevalue(fixture)), device="cpu", attn_implementation="eager")
    fam, shape, n = vlm.backend.runtime, vlm.family.shapes.llm, 48
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        hidden = fam.forward(
            torch.randn(1, n, shape.hidden),
            fam.text_positions(0, n),
            vlm.backend.engine.new_cache(),
        )
        fam.lm_head(hidden[:, -1])
    counted = counter.get_flop_counts()["Global"]
    attention = sum(v for op, v in counted.items() if "bmm" in str(op) or "matmul" in str(op))
    square = 4 * shape.attention_width * shape.layers * n * n  # QK^T and AV over all n x n pairs
    assert attention in (0, square)  # eager batched matmuls, or fused kernels torch does not count
    dense = counter.get_total_flops() - attention
    assert prefill_flops(shape, n) == dense + square * (n + 1) / (2 * n)
