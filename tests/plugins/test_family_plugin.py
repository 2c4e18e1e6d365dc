"""A family registered from outside the package (`llava_family.py`, one file: LLaVA-1.5) loads
with `VLM.load` and runs as the plain model: greedy tokens equal `model.generate`, the tower's
billed FLOPs equal torch's count, reductions apply, a pipeline prices its baseline with it."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from cascade import Pipeline
from cascade.errors import CascadeError, InputError
from cascade.vlm import VLM, ReductionConfig, build_tiny_vlm, tiny_families
from cascade.vlm.reduction import keep_count


@pytest.fixture
def tiny_llava(llava, tmp_path_factory):
    return build_tiny_vlm(tmp_path_factory.getbasetemp() / "tiny_llava", family="llava")


def _plain(b, images, question):
    msgs = [
        {
            "role": "user",
            "content": [{"type": "image"}] * len(images) + [{"type": "text", "text": question}],
        }
    ]
    text = b.processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    return b.processor(text=[text], images=[im.to_pil() for im in images], return_tensors="pt")


def test_loads_the_normal_way_and_answers_as_model_generate(tiny_llava, make_image):
    vlm = VLM.load(str(tiny_llava), device="cpu")
    b = vlm.backend
    assert type(b.model).__name__ == "LlavaForConditionalGeneration"
    assert type(vlm.family).__name__ == "LlavaFamily" and "llava" in tiny_families()
    images = [make_image(1), make_image(2, 150, 60)]
    inp = _plain(b, images, "What is in the picture?")
    with torch.inference_mode():
        out = b.model.generate(**inp, max_new_tokens=8, do_sample=False)
    r = vlm.generate(images, "What is in the picture?", max_new_tokens=8)
    assert list(r.token_ids) == out[0, inp["input_ids"].shape[1] :].tolist()
    n_vis = int((inp["input_ids"] == vlm.family.image_token_id).sum())
    assert r.bill.visual_tokens == n_vis == 2 * vlm.family.visual_tokens(120, 90) == 128
    assert r.bill.visual_tokens + r.bill.prompt_tokens == inp["input_ids"].shape[1]


def test_billed_tower_flops_equal_the_counted_flops(tiny_llava, make_image):
    vlm = VLM.load(str(tiny_llava), device="cpu", attn_implementation="eager")
    rt, images = vlm.backend.runtime, [make_image(3), make_image(4, 40, 200)]
    inputs = rt.collate(rt.preprocess([im.to_pil() for im in images]))
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        rt.encode(inputs)
    costs = [vlm.family.image_cost(im.width, im.height) for im in images]
    assert vlm.family.vision_flops(costs) == counter.get_total_flops()


def test_reductions_apply_and_the_tower_one_is_refused(tiny_llava, make_image):
    vlm = VLM.load(str(tiny_llava), device="cpu")
    img = make_image(5)
    plain = vlm.generate([img], "Why?", max_new_tokens=4)
    same = vlm.generate([img], "Why?", max_new_tokens=4, reduction=ReductionConfig("divprune", 1.0))
    assert same.token_ids == plain.token_ids
    for method in ("pool", "divprune", "visionzip", "dart"):
        r = vlm.generate([img], "Why?", max_new_tokens=2, reduction=ReductionConfig(method, 0.25))
        assert r.bill.visual_tokens == keep_count(64, 0.25) == 16, method
    with pytest.raises(InputError, match="'tower' is not supported for llava"):
        vlm.generate([img], "Why?", reduction=ReductionConfig("tower", 0.25))


def test_a_pipeline_declares_it_and_prices_its_baseline_with_it(tiny_llava, make_image):
    yaml = f"""
name: llava_qa
models:
  vlm: {{id: {tiny_llava}, device: cpu, reduction: pool, keep_ratio: 0.25}}
inputs: {{images: images, question: str}}
stages:
  ask:
    type: vlm_answer
    params: {{max_new_tokens: 2}}
    inputs: {{images: $images, question: $question}}
  answer: {{type: compose_answer, inputs: {{answer: ask.answer, baseline_images: $images}}}}
outputs: {{answer: answer.answer}}
"""
    answer = Pipeline.from_yaml(yaml).run(images=[make_image(6)], question="What?")["answer"]
    assert answer.bill.visual_tokens == 16 and answer.bill.baseline_visual_tokens == 64


def test_unregistered_its_checkpoints_are_not_supported(tmp_path_factory):
    from .conftest import _registered

    registration = _registered("tests.plugins.llava_family")
    next(registration)
    try:
        folder = build_tiny_vlm(tmp_path_factory.getbasetemp() / "tiny_llava", family="llava")
    finally:
        next(registration, None)  # unregisters
    with pytest.raises(CascadeError, match="model type 'llava' is not supported"):
        VLM.load(str(folder), device="cpu")
