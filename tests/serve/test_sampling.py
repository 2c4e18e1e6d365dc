"""OpenAI sampling fields through the official `openai` client against a real `cascade serve
--tiny` process: seeds, n choices (streamed with their index), logprobs with top_logprobs (streamed
too), stop strings, refusals naming the field, and a tool answer's n identical choices.

The VLM is the random-weight tiny Qwen2-VL, so texts are noise; what is checked is exact: the same
seed gives the same text, n gives n choices, every token has its entry, a stop string never shows.
"""

from __future__ import annotations

import numpy as np
import openai
import pytest
from openai import OpenAI

from .conftest import cascade_serve, data_url, png_bytes

pytestmark = pytest.mark.slow  # a server process with the real OCR stack

THUMBS, DOC = "cascade/thumbnail_only", "cascade/doc_qa"


@pytest.fixture(scope="module")
def client(child_dir):
    with cascade_serve(
        "--no-shipped",
        "--pipeline",
        "thumbnail_only=thumbnail_only",
        "--pipeline",
        "doc_qa=doc_qa",
        "--workers",
        "1",
        cwd=child_dir,
    ) as url:
        yield OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def messages():
    rng = np.random.default_rng(5)  # a photo-like image with no text: the VLM answers
    url = data_url(png_bytes((rng.random((160, 200, 3)) * 255).astype(np.uint8)), "image/png")
    return [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": url}},
                {"type": "text", "text": "What is in the picture?"},
            ],
        }
    ]


def _ask(client, messages, **kw):
    return client.chat.completions.create(
        model=THUMBS, messages=messages, **{"max_tokens": 12, **kw}
    )


def test_one_seed_gives_one_text(client, messages):
    hot = dict(temperature=1.5, top_p=0.95)
    a = _ask(client, messages, seed=11, **hot).choices[0].message.content
    b = _ask(client, messages, seed=11, **hot).choices[0].message.content
    c = _ask(client, messages, seed=12, **hot).choices[0].message.content
    greedy = _ask(client, messages).choices[0].message.content
    assert a == b and len({a, c, greedy}) == 3


def test_n_choices_in_the_response_and_in_the_stream(client, messages):
    r = _ask(client, messages, n=2, temperature=1.5, seed=3)
    assert [c.index for c in r.choices] == [0, 1]
    texts = [c.message.content for c in r.choices]
    assert texts[0] != texts[1]
    assert texts[0] == _ask(client, messages, temperature=1.5, seed=3).choices[0].message.content
    assert r.usage.completion_tokens == r.model_extra["cascade"]["bill"]["completion_tokens"]
    streamed, finish = {0: "", 1: ""}, {}
    for chunk in _ask(client, messages, n=2, temperature=1.5, seed=3, stream=True):
        for ch in chunk.choices:
            streamed[ch.index] += ch.delta.content or ""
            if ch.finish_reason:
                finish[ch.index] = ch.finish_reason
    assert [streamed[0], streamed[1]] == texts
    assert finish == {0: r.choices[0].finish_reason, 1: r.choices[1].finish_reason}


def test_logprobs_with_two_alternatives_per_token(client, messages):
    r = _ask(client, messages, logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for entry in content:
        assert len(entry.top_logprobs) == 2 and entry.logprob <= 0
        assert entry.top_logprobs[0].logprob == pytest.approx(entry.logprob)  # greedy: the top one
        assert entry.bytes is not None
    streamed = [
        e
        for chunk in _ask(client, messages, logprobs=True, top_logprobs=2, stream=True)
        for ch in chunk.choices
        if ch.logprobs and ch.logprobs.content
        for e in ch.logprobs.content
    ]
    assert [(e.token, e.logprob) for e in streamed] == [(e.token, e.logprob) for e in content]
    assert _ask(client, messages).choices[0].logprobs is None


def test_a_stop_string_never_appears_in_the_text(client, messages):
    full = _ask(client, messages, max_tokens=24).choices[0].message.content
    stop = full[len(full) // 2 :][:2]
    assert stop in full
    r = client.chat.completions.create(model=THUMBS, messages=messages, max_tokens=24, stop=[stop])
    text = r.choices[0].message.content
    assert stop not in text and full.startswith(text) and r.choices[0].finish_reason == "stop"
    streamed = "".join(
        ch.delta.content or ""
        for chunk in client.chat.completions.create(
            model=THUMBS, messages=messages, max_tokens=24, stop=stop, stream=True
        )
        for ch in chunk.choices
    )
    assert streamed == text


@pytest.mark.parametrize(
    "kw, param",
    [
        ({"temperature": 2.5}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"n": 0}, "n"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"top_logprobs": 30, "logprobs": True}, "top_logprobs"),
        ({"presence_penalty": 9}, "presence_penalty"),
        ({"extra_body": {"top_k": -5}}, "top_k"),
        ({"extra_body": {"min_p": 2}}, "min_p"),
        ({"extra_body": {"repetition_penalty": 0}}, "repetition_penalty"),
    ],
)
def test_out_of_range_is_a_400_naming_the_field(client, messages, kw, param):
    with pytest.raises(openai.BadRequestError) as e:
        _ask(client, messages, **kw)
    assert e.value.body["param"] == param


def test_a_tool_answer_gives_n_identical_choices(client):
    from cascade.eval.render import render_text_image

    page = render_text_image("INVOICE 2291   TOTAL DUE 118.40 EUR", font_size=22, size=(900, 1200))
    msgs = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": data_url(png_bytes(page), "image/png")}},
                {"type": "text", "text": "What is the total due on the invoice?"},
            ],
        }
    ]
    r = client.chat.completions.create(model=DOC, messages=msgs, n=3, logprobs=True)
    assert r.model_extra["cascade"]["produced_by"] == "tool"  # the real OCR read it
    assert len(r.choices) == 3 and len({c.message.content for c in r.choices}) == 1
    assert "118.40" in r.choices[0].message.content
    assert all(c.finish_reason == "stop" and c.logprobs.content is None for c in r.choices)
    chunks = list(client.chat.completions.create(model=DOC, messages=msgs, n=2, stream=True))
    texts = {
        i: "".join(ch.delta.content or "" for c in chunks for ch in c.choices if ch.index == i)
        for i in (0, 1)
    }
    assert texts == {0: r.choices[0].message.content, 1: r.choices[0].message.content}


JSON_SCHEMA = {
    "type": "object",
    "required": ["caption", "objects"],
    "additionalProperties": False,
    "properties": {
        "caption": {"type": "string", "maxLength": 12},
        "objects": {"type": "integer", "minimum": 0, "maximum": 20},
    },
}


def test_a_json_schema_response_parses_and_has_the_required_fields(client, messages):
    import json

    import jsonschema

    fmt = {"type": "json_schema", "json_schema": {"name": "scene", "schema": JSON_SCHEMA}}
    for kw in ({}, {"temperature": 1.0, "seed": 4, "n": 2}):
        r = _ask(client, messages, max_tokens=64, response_format=fmt, **kw)
        for choice in r.choices:
            value = json.loads(choice.message.content)
            jsonschema.validate(value, JSON_SCHEMA)
            assert set(value) == {"caption", "objects"} and choice.finish_reason == "stop"
    streamed = "".join(
        ch.delta.content or ""
        for chunk in _ask(client, messages, max_tokens=64, response_format=fmt, stream=True)
        for ch in chunk.choices
    )
    jsonschema.validate(json.loads(streamed), JSON_SCHEMA)
    # json_object bounds no string: a random-weight model may still be inside one at max_tokens
    # ("length"); an answer that ended on its own is a JSON object.
    r = _ask(
        client,
        messages,
        max_tokens=64,
        response_format={"type": "json_object"},
        n=4,
        temperature=1.0,
        seed=0,
    )
    done = [c.message.content for c in r.choices if c.finish_reason == "stop"]
    assert done and all(isinstance(json.loads(t), dict) for t in done)
    assert all(c.message.content.startswith("{") for c in r.choices)
    with pytest.raises(openai.BadRequestError) as e:
        _ask(
            client,
            messages,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": "nonsense"}},
            },
        )
    assert e.value.body["param"] == "response_format.json_schema.schema"


def test_a_tool_answer_fills_the_same_schema(client):
    import json

    from cascade.eval.render import render_text_image

    page = render_text_image("INVOICE 2291   TOTAL DUE 118.40 EUR", font_size=22, size=(900, 1200))
    msgs = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": data_url(png_bytes(page), "image/png")}},
                {"type": "text", "text": "What is the total due on the invoice?"},
            ],
        }
    ]
    schema = {"type": "object", "required": ["total"], "properties": {"total": {"type": "number"}}}
    r = client.chat.completions.create(
        model=DOC,
        messages=msgs,
        response_format={"type": "json_schema", "json_schema": {"name": "total", "schema": schema}},
    )
    assert r.model_extra["cascade"]["produced_by"] == "tool"
    assert json.loads(r.choices[0].message.content) == {"total": 118.4}
