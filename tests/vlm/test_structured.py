"""Structured output: JSON / JSON Schema constrained decoding (xgrammar) on the random-weight tiny
model, whose own choices are noise: whatever it prefers, the grammar lets only valid JSON out."""

import json

import jsonschema
import pytest

from cascade.decoding import SamplingParams, sampling_params
from cascade.errors import InputError

Q = "Describe it as JSON."
SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "count", "tags"],
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "count": {"type": "integer", "minimum": 0, "maximum": 99},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
    },
}


def _fmt(schema=None, **kw):
    fmt = {"type": "json_schema", "schema": schema} if schema else {"type": "json_object"}
    return sampling_params({"response_format": fmt, **kw})


def test_the_tiny_tokenizer_is_read_as_byte_level(vlm):
    import xgrammar as xgr

    info = xgr.TokenizerInfo.from_huggingface(vlm.backend.processor.tokenizer)
    assert info.vocab_type == xgr.VocabType.BYTE_LEVEL


@pytest.mark.parametrize(
    "kw", [{}, {"temperature": 1.0, "seed": 1}, {"temperature": 1.5, "seed": 2}]
)
def test_a_schema_answer_parses_and_matches(vlm, make_image, kw):
    r = vlm.generate([make_image(21)], Q, max_new_tokens=96, sampling=_fmt(SCHEMA, **kw))
    assert r.finish_reason == "stop"
    value = json.loads(r.text)
    jsonschema.validate(value, SCHEMA)
    assert list(value) == ["name", "count", "tags"]  # the schema's order


def test_every_completion_is_constrained(vlm, make_image):
    r = vlm.generate(
        [make_image(22)], Q, max_new_tokens=96, sampling=_fmt(SCHEMA, n=3, temperature=1.0, seed=5)
    )
    values = [json.loads(c.text) for c in r.completions]
    for v in values:
        jsonschema.validate(v, SCHEMA)
    assert len({json.dumps(v) for v in values}) > 1


def test_json_object_gives_an_object(vlm, make_image):
    for kw in ({}, {"temperature": 1.0, "seed": 3}):
        r = vlm.generate([make_image(23)], Q, max_new_tokens=64, sampling=_fmt(**kw))
        assert r.finish_reason == "stop" and isinstance(json.loads(r.text), dict)


def test_streamed_text_is_the_json(vlm, make_image):
    events = []
    r = vlm.generate(
        [make_image(24)], Q, max_new_tokens=96, sampling=_fmt(SCHEMA), on_token=events.append
    )
    assert "".join(e.text for e in events) == r.text
    jsonschema.validate(json.loads(r.text), SCHEMA)


def test_greedy_without_a_format_is_unchanged(vlm, make_image):
    img = make_image(25)
    assert (
        vlm.generate([img], Q, max_new_tokens=8).token_ids
        == vlm.generate([img], Q, max_new_tokens=8, sampling=SamplingParams()).token_ids
    )


def test_format_errors_name_the_place(vlm, make_image):
    with pytest.raises(InputError, match=r"sampling\.response_format: .*needs its schema"):
        sampling_params({"response_format": {"type": "json_schema"}})
    with pytest.raises(InputError, match=r"sampling\.response_format: not a valid JSON Schema"):
        _fmt({"type": "object", "properties": 3})
    # valid JSON Schema that xgrammar does not take (a regex it cannot compile)
    with pytest.raises(InputError, match=r"response_format\.json_schema\.schema: xgrammar cannot"):
        vlm.generate([make_image(26)], Q, sampling=_fmt({"type": "string", "pattern": "(?<=a)b"}))
