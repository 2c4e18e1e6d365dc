"""A reduction registered from outside the package (`stride_reduction.py`, one file) is a method
like the built-ins: in `ReductionConfig`, the runtime, a `models:` entry, a stage param, the JSON
schema and `cascade stages`; unregistered, the same YAML is refused by name."""

import pytest
import torch

from cascade import Pipeline, SpecError
from cascade.registry import get_stage_class
from cascade.vlm import VLM, ReductionConfig, reduction_names
from cascade.vlm.reduction import keep_count, reduce_tokens

PIPELINE = """\
name: strided
models:
  vlm: {{id: {model}, device: cpu, kv_cache_bytes: 0, reduction: stride, keep_ratio: 0.25}}
inputs: {{images: images, question: str}}
stages:
  ask:
    type: vlm_answer
    params: {{max_new_tokens: 3{param}}}
    inputs: {{images: $images, question: $question}}
outputs: {{answer: ask.answer}}
"""


def test_the_method_keeps_evenly_spaced_tokens(stride):
    x = torch.randn(48, 8)
    r = reduce_tokens(x, (1, 6, 8), ReductionConfig("stride", 0.25))
    assert r.index.tolist() == torch.linspace(0, 47, 12).round().long().tolist()
    assert torch.equal(r.embeds, x[r.index])
    assert "stride" in reduction_names("after_tower")


def test_the_runtime_runs_it_and_keep_1_is_the_unreduced_model(stride, tiny_qwen, make_image):
    vlm = VLM.load(str(tiny_qwen), device="cpu")
    img = make_image(1)
    plain = vlm.generate([img], "What is it?", max_new_tokens=4)
    same = vlm.generate(
        [img], "What is it?", max_new_tokens=4, reduction=ReductionConfig("stride", 1.0)
    )
    fewer = vlm.generate(
        [img], "What is it?", max_new_tokens=4, reduction=ReductionConfig("stride", 0.25)
    )
    assert same.token_ids == plain.token_ids
    assert fewer.bill.visual_tokens == keep_count(plain.bill.visual_tokens, 0.25)
    assert fewer.bill.prefill_flops < plain.bill.prefill_flops and fewer.bill.reduction == "stride"


def test_yaml_stage_params_schema_and_cascade_stages_know_it(stride, tiny_qwen, make_image):
    pipe = Pipeline.from_yaml(PIPELINE.format(model=tiny_qwen, param=""))
    answer = pipe.run(images=[make_image(2)], question="What is it?")["answer"]
    assert answer.bill.reduction == "stride" and answer.bill.keep_ratio == 0.25
    assert Pipeline.from_yaml(PIPELINE.format(model=tiny_qwen, param=", reduction: stride"))
    cls = get_stage_class("vlm_answer")
    assert "stride" in cls.describe()["params"]["reduction"]["type"]
    assert "stride" in cls.Params.model_json_schema()["properties"]["reduction"]["anyOf"][0]["enum"]


def test_unregistered_the_yaml_is_refused_by_name(tiny_qwen):
    assert "stride" not in reduction_names()  # registered only for the tests that ask for it
    with pytest.raises(
        SpecError, match=r"models\.vlm\.reduction: .*unknown reduction method 'stride'"
    ):
        Pipeline.from_yaml(PIPELINE.format(model=tiny_qwen, param=""))
