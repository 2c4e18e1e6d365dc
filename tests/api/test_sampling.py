"""Sampling through the Python API (`ask(..., sampling=...)`) and YAML (`vlm_answer`'s `sampling`
param): seeds, n completions, settings laid over the stage's own, errors naming the field."""

import numpy as np
import pytest

from cascade import QA, InputError, SpecError
from cascade.artifacts import Image

HOT = {"temperature": 50.0, "top_k": 100}  # random weights, flattened: each seed draws its own
Q = "What is in the picture?"


@pytest.fixture(scope="module")
def qa():
    return QA.offline("thumbnail_only")


@pytest.fixture(scope="module")
def image():
    rng = np.random.default_rng(0)
    return Image((rng.random((96, 128, 3)) * 255).astype(np.uint8), source="random")


def test_a_seed_gives_one_answer_and_greedy_stays_the_default(qa, image):
    a = qa.ask(image, Q, sampling={**HOT, "seed": 3}, max_new_tokens=8)
    b = qa.ask(image, Q, sampling={**HOT, "seed": 3}, max_new_tokens=8)
    c = qa.ask(image, Q, sampling={**HOT, "seed": 4}, max_new_tokens=8)
    assert a.text == b.text != c.text
    greedy = qa.ask(image, Q, max_new_tokens=8)
    assert qa.ask(image, Q, sampling={}, max_new_tokens=8).text == greedy.text != a.text
    assert [x.text for x in greedy.completions] == [greedy.text]


def test_n_completions_come_with_the_answer(qa, image):
    a = qa.ask(image, Q, sampling={**HOT, "seed": 3, "n": 3, "logprobs": True}, max_new_tokens=6)
    assert len(a.completions) == 3 and a.text == a.completions[0].text
    assert (
        a.completions[0].text
        == qa.ask(image, Q, sampling={**HOT, "seed": 3}, max_new_tokens=6).text
    )
    assert all(len(c.logprobs) == len(c.token_ids) for c in a.completions)
    assert a.bill.generated_tokens == sum(len(c.token_ids) for c in a.completions)


def test_bad_settings_name_the_field(qa, image):
    with pytest.raises(InputError, match=r"sampling\.top_p: input should be greater than 0"):
        qa.ask(image, Q, sampling={"top_p": 0})
    with pytest.raises(InputError, match=r"sampling\.tempreature: extra inputs"):
        qa.ask(image, Q, sampling={"tempreature": 1})


def _pipeline(tmp_path, sampling: str, with_input: bool = True):
    text = (
        """
name: sampled
models:
  vlm: {id: Qwen/Qwen2-VL-2B-Instruct}
inputs:
  images: {type: images}
  question: {type: str}
"""
        + ("  sampling: {type: sampling, default: null}\n" if with_input else "")
        + f"""
stages:
  vlm:
    type: vlm_answer
    params: {{max_new_tokens: 6, sampling: {sampling}}}
    inputs: {{images: $images, question: $question"""
        + (", sampling: $sampling" if with_input else "")
        + """}
outputs:
  answer: vlm.answer
"""
    )
    path = tmp_path / "sampled.yaml"
    path.write_text(text)
    return path


def test_yaml_sets_the_stage_settings_and_a_request_overrides_what_it_sets(tmp_path, image):
    qa = QA.offline(_pipeline(tmp_path, "{temperature: 50.0, top_k: 100, seed: 7, n: 2}"))
    own = qa.ask(image, Q)
    assert len(own.completions) == 2
    assert qa.ask(image, Q).text == own.text  # the YAML's seed
    reseeded = qa.ask(image, Q, sampling={"seed": 8})  # temperature, top_k, n stay the YAML's
    assert len(reseeded.completions) == 2 and reseeded.text != own.text
    assert reseeded.text == qa.ask(image, Q, sampling={**HOT, "seed": 8, "n": 1}).text


def test_yaml_settings_are_checked_with_their_path(tmp_path):
    with pytest.raises(SpecError, match=r"stages\.vlm\.params\.sampling\.temperature"):
        QA.offline(_pipeline(tmp_path, "{temperature: -1}"))
    with pytest.raises(SpecError, match=r"stages\.vlm\.params\.sampling\.stop"):
        QA.offline(_pipeline(tmp_path, "{stop: ['a', 'b', 'c', 'd', 'e']}"))


def test_a_pipeline_without_a_sampling_input_says_so(tmp_path, image):
    qa = QA.offline(_pipeline(tmp_path, "null", with_input=False))
    with pytest.raises(InputError, match="has no 'sampling' input"):
        qa.ask(image, Q, sampling={"seed": 1})


SCHEMA = {
    "type": "object",
    "required": ["label", "count"],
    "additionalProperties": False,
    "properties": {
        "label": {"type": "string", "maxLength": 6},
        "count": {"type": "integer", "minimum": 0, "maximum": 9},
    },
}


def test_ask_with_a_schema_gives_json_that_matches(qa, image):
    import json

    import jsonschema

    for sampling in (None, {**HOT, "seed": 2}):
        a = qa.ask(image, Q, schema=SCHEMA, sampling=sampling, max_new_tokens=64)
        jsonschema.validate(json.loads(a.text), SCHEMA)
    with pytest.raises(InputError, match=r"sampling\.response_format: not a valid JSON Schema"):
        qa.ask(image, Q, schema={"type": "object", "properties": 3})


@pytest.mark.slow
def test_a_tool_answer_fills_the_schema(tmp_path):
    import json

    from PIL import Image as PILImage

    from cascade.eval.render import render_text_image

    page = render_text_image("INVOICE 2291   TOTAL DUE 118.40 EUR", font_size=22, size=(900, 1200))
    PILImage.fromarray(page).save(tmp_path / "page.png")
    schema = {
        "type": "object",
        "required": ["total", "currency"],
        "properties": {"total": {"type": "number"}, "currency": {"type": "string"}},
    }
    answer = QA.offline("doc_qa").ask(
        tmp_path / "page.png", "What is the total due on the invoice?", schema=schema
    )
    assert answer.produced_by == "tool"
    assert json.loads(answer.text) == {"total": 118.4, "currency": ""}
