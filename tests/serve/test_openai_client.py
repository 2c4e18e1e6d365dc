"""The official `openai` client, unchanged, against the server on a real port."""
from __future__ import annotations

import openai
import pytest
from openai import OpenAI

from .conftest import data_url, fake_config, running_server


@pytest.fixture(scope="module")
def client(media_dir):
    from cascade.serve.app import create_app

    with running_server(create_app(fake_config())) as url:
        yield OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def messages(media_dir):
    d, _ = media_dir
    url = data_url((d / "sign.mp4").read_bytes(), "video/mp4")
    return [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": url}},
                                         {"type": "text", "text": "What does the sign say?"}]}]


def test_models_list(client):
    assert {m.id for m in client.models.list()} == {"cascade/video_fake", "cascade/images_fake"}


def test_non_streaming(client, messages):
    r = client.chat.completions.create(model="cascade/video_fake", messages=messages)
    assert r.choices[0].message.content.startswith("I looked at 6 image(s)")
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens > 0 and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    extra = r.model_extra["cascade"]  # the extra field survives the client's parsing
    assert extra["bill"]["baseline_visual_tokens"] > extra["bill"]["visual_tokens"]


def test_streaming(client, messages):
    stream = client.chat.completions.create(model="cascade/video_fake", messages=messages,
                                            stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("I looked at 6 image(s)")
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens > 0


def test_errors_raise_the_right_exceptions(client, messages):
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="cascade/nope", messages=messages)
    assert e.value.body["code"] == "model_not_found"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="cascade/images_fake", messages=messages)
    assert "video" in e.value.message
