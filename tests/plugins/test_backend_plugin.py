"""A backend registered from outside the package (`recorded_backend.py`, one file) is chosen by
`backend:` in YAML, with its own options validated by YAML path, and by `VLM.load`."""

import json

import pytest

from cascade import Pipeline, SpecError
from cascade.errors import InputError
from cascade.vlm import VLM

PIPELINE = """\
name: replay
models:
  vlm: {{id: eval-run-1, backend: recorded{options}}}
inputs: {{images: images, question: str}}
stages:
  ask:
    type: vlm_answer
    params: {{max_new_tokens: 4}}
    inputs: {{images: $images, question: $question}}
outputs: {{answer: ask.answer}}
"""


@pytest.fixture
def answers(tmp_path):
    path = tmp_path / "answers.json"
    path.write_text(json.dumps({"What does the sign say?": "It says EXIT three now please"}))
    return path


def test_yaml_selects_it_with_its_own_options(recorded, answers, make_image):
    pipe = Pipeline.from_yaml(PIPELINE.format(options=f", answers: '{answers}', fallback: unsure"))
    spec = pipe.models["vlm"].spec
    assert type(spec) is recorded.RecordedSpec and spec.fallback == "unsure"
    out = pipe.run(images=[make_image(1)], question="What does the sign say?")["answer"]
    assert out.text == "It says EXIT three" and out.bill.finish_reason == "length"
    assert pipe.run(images=[make_image(1)], question="Who?")["answer"].text == "unsure"


@pytest.mark.parametrize(
    "options, parts",
    [
        (
            ", answer: a.json",
            [":3: models.vlm.answer", "unknown field 'answer'", "did you mean 'answers'?"],
        ),
        ("", ["models.vlm.answers", "required field 'answers' is missing"]),
        (
            ", answers: a.json, device: cpu",
            ["models.vlm.device", "an option of backend transformers"],
        ),
        (", answers: a.json, fallback: ''", ["models.vlm.fallback", "at least 1 character"]),
    ],
)
def test_its_options_are_validated_by_yaml_path(recorded, options, parts):
    with pytest.raises(SpecError) as info:
        Pipeline.from_yaml(PIPELINE.format(options=options), label="replay.yaml")
    for part in parts:
        assert part in str(info.value), str(info.value)


def test_vlm_load_reaches_it(recorded, answers, make_image):
    vlm = VLM.load("eval-run-1", backend="recorded", answers=str(answers))
    tokens = []
    r = vlm.generate(
        [make_image(2)], "What does the sign say?", max_new_tokens=16, on_token=tokens.append
    )
    assert r.text == "It says EXIT three now please" and r.backend == "recorded"
    assert "".join(t.text for t in tokens) == r.text and vlm.family is None
    with pytest.raises(InputError, match="cannot read answers file"):
        VLM.load("x", backend="recorded", answers=str(answers) + ".missing")


def test_unregistered_the_backend_is_refused_by_name():
    with pytest.raises(SpecError, match=r"models\.vlm\.backend: .*'openai' or 'transformers'"):
        Pipeline.from_yaml(PIPELINE.format(options=", answers: a.json"))
    with pytest.raises(
        InputError, match=r"unknown VLM backend 'recorded'.*\['openai', 'transformers'\]"
    ):
        VLM.load("x", backend="recorded")
