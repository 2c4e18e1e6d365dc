"""The `models:` block: validated with YAML paths and suggestions, addressed by overrides, shared
by every stage and pipeline that declares the same model, and never loaded to validate."""

import pytest

from cascade import Pipeline, SpecError
from cascade.models import release_models
from cascade.vlm import build_tiny_vlm
from cascade.vlm.options import ModelSpec, OpenAISpec, TransformersSpec

PIPELINE = """\
name: m
models:
  vlm: {{id: {model}, device: cpu{extra}}}
inputs:
  images: images
  question: str
stages:
  ask:
    type: vlm_answer
    params: {{model: {name}, max_new_tokens: 2}}
    inputs: {{images: $images, question: $question}}
  answer:
    type: compose_answer
    inputs: {{answer: ask.answer, baseline_images: $images}}
outputs:
  answer: answer.answer
"""


def yaml(model="Org/Not-On-Any-Hub", extra="", name="vlm"):
    return PIPELINE.format(model=model, extra=extra, name=name)


@pytest.mark.parametrize(
    "extra, name, parts",
    [
        (
            ", dtyp: bf16",
            "vlm",
            [":3: models.vlm.dtyp", "unknown field 'dtyp'", "did you mean 'dtype'?"],
        ),
        (", keep_ratio: 2", "vlm", ["models.vlm.keep_ratio", "less than or equal to 1"]),
        (
            ", base_url: http://x/v1",
            "vlm",
            [":3: models.vlm.base_url", "unknown field 'base_url'", "an option of backend openai"],
        ),
        (", backend: vllm", "vlm", [":3: models.vlm.backend", "'openai' or 'transformers'"]),
        # each backend validates its own options: `device` is the in-process backend's
        (
            ", backend: openai",
            "vlm",
            [
                "models.vlm.device",
                "unknown field 'device'",
                "base_url",
                "an option of backend transformers",
            ],
        ),
        (", reduction: prune", "vlm", ["models.vlm.reduction", "'pool'"]),
        (
            "",
            "vlmm",
            [
                ":10: stages.ask.params.model",
                "names model 'vlmm'",
                "did you mean 'vlm'?",
                "declared models: vlm",
            ],
        ),
    ],
)
def test_bad_models_are_named_by_yaml_path(extra, name, parts):
    with pytest.raises(SpecError) as info:
        Pipeline.from_yaml(yaml(extra=extra, name=name), label="m.yaml")
    for part in parts:
        assert part in str(info.value), str(info.value)


def test_validation_loads_nothing_and_every_shipped_pipeline_declares_its_models():
    release_models()
    p = Pipeline.from_yaml(yaml())  # a hub id nobody can reach: validating never touches it
    assert p.models["vlm"].spec.id == "Org/Not-On-Any-Hub"
    from cascade.models import _POOL

    assert not _POOL
    for name in (
        "video_qa",
        "video_qa_selfcheck",
        "multi_image_qa",
        "doc_qa",
        "full_res",
        "thumbnail_only",
    ):
        assert "vlm" in Pipeline.load(name).models
    assert Pipeline.load("full_res").models["vlm"].spec.resolution == "full"


def test_overrides_address_models_and_precedence_is_yaml_then_bulk_then_dotted():
    p = Pipeline.from_yaml(
        yaml(),
        overrides={"models.vlm.id": "Other/Model", "models.vlm.keep_ratio": 0.5},
        model_params={"id": "Bulk/Model", "reduction": "pool"},
    )
    spec = p.models["vlm"].spec
    assert (spec.id, spec.reduction, spec.keep_ratio) == ("Other/Model", "pool", 0.5)
    with pytest.raises(SpecError, match="no model 'vml' .*did you mean 'vlm'"):
        Pipeline.from_yaml(yaml(), overrides={"models.vml.id": "x"})
    shorthand = Pipeline.from_yaml(
        yaml().replace("vlm: {id: Org/Not-On-Any-Hub, device: cpu}", "vlm: Org/Short")
    )
    assert shorthand.models["vlm"].spec == TransformersSpec(id="Org/Short")
    assert ModelSpec.model_validate({"id": "m", "backend": "openai"}) == OpenAISpec(id="m")
    with pytest.raises(TypeError, match="base of every backend"):
        ModelSpec(id="m")
    by_type = Pipeline.from_yaml(
        yaml(),
        type_params={"vlm_answer": {"max_new_tokens": 9}, "*": {"max_new_tokens": 7, "nope": 1}},
    )
    assert by_type.stages["ask"].params.max_new_tokens == 9  # the type's own entry beats "*"
    with pytest.raises(SpecError, match="'models' is reserved"):
        Pipeline.from_yaml(
            yaml().replace("  ask:\n", "  models:\n").replace("ask.answer", "models.answer")
        )


def test_one_loaded_model_per_declaration_shared_across_pipelines(tmp_path):
    release_models()
    model = str(build_tiny_vlm(size="test"))
    a, b = (
        Pipeline.from_yaml(yaml(model)),
        Pipeline.from_yaml(yaml(model, ", keep_ratio: 0.5, reduction: pool")),
    )
    small = Pipeline.from_yaml(yaml(model, ", max_pixels: 3136"))
    vlm = a.models["vlm"].vlm
    assert b.models["vlm"].vlm is vlm  # reduction defaults are per call, not another model
    assert small.models["vlm"].vlm is not vlm  # other image limits: another declared model
    assert small.models["vlm"].family.visual_tokens(640, 480) == 2  # 56x28 px under 3136 pixels
    assert a.models["vlm"].family is vlm.family  # once loaded, the family is the loaded one's
    release_models()


def test_qa_swaps_models_in_the_spec_without_loading_the_pipeline_twice(monkeypatch):
    import cascade.pipeline as pipeline_module
    from cascade import QA

    calls = []
    real = pipeline_module.load_spec
    monkeypatch.setattr(
        pipeline_module, "load_spec", lambda *a, **k: calls.append(a) or real(*a, **k)
    )
    qa = QA("multi_image_qa", model="Org/Mine", device="cpu")
    assert len(calls) == 1
    assert qa.pipeline.models["vlm"].spec.id == "Org/Mine"
    assert qa.pipeline.models["vlm"].spec.device == "cpu"
    assert qa.pipeline.stages["clip"].params.device == "cpu"  # every stage that has a device
