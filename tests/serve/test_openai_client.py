"""The official `openai` client, unchanged, against the server on a real port."""

from __future__ import annotations

import openai
import pytest
from openai import OpenAI

from .conftest import IMAGES, VIDEO, data_url, running_server, small_config, warm


@pytest.fixture(scope="module")
def client(media_dir, tiny_vlm):
    from cascade.serve.app import create_app

    app = create_app(small_config(tiny_vlm))
    warm(app)
    with running_server(app) as url:
        yield OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def messages(media_dir):
    d, _ = media_dir
    url = data_url((d / "sign.mp4").read_bytes(), "video/mp4")
    return [
        {
            "role": "user",
            "content": [
                {"type": "video_url", "video_url": {"url": url}},
                {"type": "text", "text": "What does the sign say?"},
            ],
        }
    ]


def test_models_list(client):
    assert {m.id for m in client.models.list()} == {VIDEO, IMAGES}


def test_non_streaming_and_streaming_agree(client, messages):
    r = client.chat.completions.create(model=VIDEO, messages=messages)
    text = r.choices[0].message.content  # random-weight VLM: any non-empty text
    assert isinstance(text, str) and text
    assert r.choices[0].finish_reason in ("stop", "length")
    extra = r.model_extra["cascade"]  # the extra field survives the client's parsing
    bill = extra["bill"]
    assert r.usage.prompt_tokens == bill["visual_tokens"] + bill["text_tokens"] > 0
    assert r.usage.completion_tokens == bill["completion_tokens"] > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert bill["baseline_visual_tokens"] > bill["visual_tokens"] > 0

    stream = client.chat.completions.create(
        model=VIDEO, messages=messages, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text  # greedy decoding: the same answer either way
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens == r.usage.prompt_tokens
    assert chunks[-1].usage.completion_tokens == r.usage.completion_tokens


def test_errors_raise_the_right_exceptions(client, messages):
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="cascade/nope", messages=messages)
    assert e.value.body["code"] == "model_not_found"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=IMAGES, messages=messages)
    assert "video" in e.value.message


def test_what_cannot_be_honoured_raises_bad_request(client, messages):
    for kwargs, param in [
        ({"logit_bias": {"42": 5}}, "logit_bias"),
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
    ]:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model=VIDEO, messages=messages, **kwargs)
        assert e.value.body["param"] == param and e.value.body["code"] == "unsupported_parameter"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=VIDEO, messages=messages, top_logprobs=2)
    assert e.value.body["param"] == "top_logprobs" and "logprobs" in e.value.message
    r = client.chat.completions.create(model=VIDEO, messages=messages, temperature=0, seed=1)
    assert r.choices[0].message.content
