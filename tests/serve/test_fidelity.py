"""Request fidelity with the official `openai` client on a real port: `max_tokens` caps the answer,
earlier turns go into the prompt while the media's KV prefix is still reused, and a stream's
chunks leave while the VLM is still generating.

The small test pipelines run the real `vlm_answer` stage on the random-weight tiny Qwen2-VL: the
answers are noise, the token counts, the KV cache and the timing are real.
"""

from __future__ import annotations

import re
import time

import httpx
import numpy as np
import openai
import pytest
from openai import OpenAI

from .conftest import (
    IMAGES,
    VIDEO,
    data_url,
    decode_seconds,
    png_bytes,
    running_server,
    small_config,
    stream_spread,
    warm,
)


@pytest.fixture(scope="module")
def served(tiny_vlm):
    from cascade.serve.app import create_app

    app = create_app(small_config(tiny_vlm, workers=2, max_concurrent=2))
    warm(app)
    with running_server(app) as url:
        yield OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=120), app, url


@pytest.fixture(scope="module")
def image_url() -> str:
    rng = np.random.default_rng(3)
    return data_url(png_bytes((rng.random((96, 128, 3)) * 255).astype(np.uint8)), "image/png")


@pytest.fixture(scope="module")
def video_url(media_dir) -> str:
    d, _ = media_dir
    return data_url((d / "sign.mp4").read_bytes(), "video/mp4")


def _user(question: str, url: str | None = None, kind: str = "image_url") -> dict:
    media = [{"type": kind, kind: {"url": url}}] if url else []
    return {"role": "user", "content": [*media, {"type": "text", "text": question}]}


def _metric(text: str, name: str, labels: str) -> float:
    m = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


@pytest.mark.parametrize("model, kind", [(IMAGES, "image_url"), (VIDEO, "video_url")])
def test_max_tokens_caps_the_answer(served, image_url, video_url, model, kind):
    client, *_ = served
    messages = [_user("Describe it.", image_url if kind == "image_url" else video_url, kind)]
    full = client.chat.completions.create(model=model, messages=messages)
    assert full.usage.completion_tokens > 3, "the stage's own limit (16) is the default"
    for field in ("max_tokens", "max_completion_tokens"):
        r = client.chat.completions.create(model=model, messages=messages, **{field: 3})
        assert r.usage.completion_tokens == 3 and r.choices[0].finish_reason == "length"
        # greedy: the capped answer is the start of the full one
        assert full.choices[0].message.content.startswith(r.choices[0].message.content)
        assert r.model_extra["cascade"]["bill"]["completion_tokens"] == 3
    # above the stage's param too: the request's limit replaces it, not only lowers it
    r = client.chat.completions.create(model=model, messages=messages, max_tokens=24)
    assert (
        r.usage.completion_tokens > full.usage.completion_tokens
        or r.choices[0].finish_reason == "stop"
    )
    stream = client.chat.completions.create(
        model=model,
        messages=messages,
        max_tokens=3,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[-1].usage.completion_tokens == 3
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"


def test_earlier_turns_are_in_the_prompt_and_the_media_prefix_still_hits(
    served, image_url, tiny_vlm
):
    from transformers import AutoTokenizer

    client, *_ = served
    q1, q2 = "What is in the picture?", "And what colour is it?"
    r1 = client.chat.completions.create(model=IMAGES, messages=[_user(q1, image_url)])
    a1 = r1.choices[0].message.content
    alone = client.chat.completions.create(model=IMAGES, messages=[_user(q2, image_url)])
    r2 = client.chat.completions.create(
        model=IMAGES,
        messages=[_user(q1, image_url), {"role": "assistant", "content": a1}, _user(q2)],
    )
    tok = AutoTokenizer.from_pretrained(tiny_vlm)
    history_tokens = len(tok(q1)["input_ids"]) + len(tok(a1)["input_ids"])
    # The first turn is in the second request's prompt: at least its text's tokens more (plus the
    # template's turn markers) than the same question asked alone about the same image.
    grown = r2.usage.prompt_tokens - alone.usage.prompt_tokens
    assert history_tokens <= grown <= history_tokens + 16
    assert (
        r2.model_extra["cascade"]["trace"]["counters"]["prompt_tokens"]
        == alone.model_extra["cascade"]["trace"]["counters"]["prompt_tokens"] + grown
    )
    # ... and the image's KV prefix is reused: the history sits after it, in the suffix.
    bill2 = r2.model_extra["cascade"]["bill"]
    assert bill2["kv_cache"] == "hit"
    assert r2.model_extra["cascade"]["trace"]["counters"]["vision_tower_calls"] == 0
    assert (
        bill2["visual_tokens"]
        < r2.usage.prompt_tokens_details.cached_tokens
        < r2.usage.prompt_tokens
    )


def test_an_assistant_message_with_nothing_to_answer_is_a_400(served, image_url):
    client, *_ = served
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model=IMAGES,
            messages=[{"role": "assistant", "content": "Hello!"}, _user("What is it?", image_url)],
        )
    assert e.value.body["code"] == "invalid_conversation" and e.value.body["param"] == "messages[0]"


def test_a_pipeline_without_the_inputs_refuses_rather_than_ignores(tmp_path, tiny_vlm):
    from cascade.serve.config import ServeConfig
    from cascade.serve.engine import Engine
    from cascade.serve.errors import APIError
    from cascade.serve.protocol import parse_chat_request

    (tmp_path / "bare.yaml").write_text("""
name: bare
models: {vlm: Qwen/Qwen2-VL-2B-Instruct}
inputs: {images: images, question: str}
stages:
  vlm: {type: vlm_answer, inputs: {images: $images, question: $question}}
outputs: {answer: vlm.answer}
""")
    engine = Engine(
        ServeConfig(model=tiny_vlm, shipped=False, pipelines={"bare": str(tmp_path / "bare.yaml")})
    )
    try:
        served, url = engine.get("cascade/bare"), "data:image/png;base64,AAAA"
        for body, param in [
            ({"max_tokens": 3, "messages": [_user("q", url)]}, "max_tokens"),
            ({"seed": 3, "temperature": 0.5, "messages": [_user("q", url)]}, "seed"),
            (
                {
                    "messages": [
                        _user("q1", url),
                        {"role": "assistant", "content": "a"},
                        _user("q2"),
                    ]
                },
                "messages",
            ),
        ]:
            with pytest.raises(APIError) as e:
                engine.check_request(parse_chat_request({"model": "cascade/bare", **body}), served)
            assert (e.value.status, e.value.code, e.value.param) == (
                400,
                "unsupported_parameter",
                param,
            )
        engine.check_request(
            parse_chat_request({"model": "cascade/bare", "messages": [_user("q", url)]}), served
        )
    finally:
        engine.close()


def _long_answer(client: OpenAI, image_url: str, limit: int):
    """(messages, completion) of a question whose answer runs to `limit` tokens: with random
    weights the length is whatever the model does, and a decode must be long enough to time."""
    for question in ("Tell me a long story about it.", "Describe it.", "What is it?", "Why?"):
        messages = [_user(question, image_url)]
        plain = client.chat.completions.create(model=IMAGES, messages=messages, max_tokens=limit)
        if plain.choices[0].finish_reason == "length":
            return messages, plain
    raise AssertionError("no question got a long answer")


@pytest.mark.slow
def test_stream_chunks_leave_while_the_vlm_generates(served, image_url):
    client, *_ = served
    # The spread is only measurable over a decode that takes a while; a fast machine gets a
    # longer answer rather than a guard that fails on its speed.
    for limit in (128, 512, 2048):
        messages, plain = _long_answer(client, image_url, limit)
        texts, arrivals, decode_s = stream_spread(client, IMAGES, messages, limit)
        if decode_s > 0.1:
            break
    assert "".join(texts) == plain.choices[0].message.content
    assert decode_s > 0.1, "2,048 tokens take longer than that"
    # One chunk per token as it is chosen (a token whose text is an incomplete character adds
    # none): the chunks are spread over the decode, the first one long before the last. A
    # finished answer cut into pieces arrives all at once.
    assert 1 < len(texts) <= plain.usage.completion_tokens
    assert arrivals[-1] - arrivals[0] > 0.5 * decode_s


def test_a_stream_that_fails_before_its_first_token_keeps_its_status(served, image_url):
    client, *_ = served
    with pytest.raises(openai.InternalServerError) as e:
        client.chat.completions.create(
            model=IMAGES, messages=[_user("CRASH now", image_url)], stream=True
        )
    assert e.value.body["code"] == "pipeline_error"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model=IMAGES, messages=[_user("hi", image_url)], stream=True, logit_bias={"42": 5}
        )
    assert e.value.body["param"] == "logit_bias"


def test_a_client_that_leaves_mid_stream_stops_the_generation(served, image_url):
    client, app, url = served
    engine = app.state.engine
    messages, timed = _long_answer(client, image_url, 64)
    per_token = decode_seconds(timed) / (timed.usage.completion_tokens - 1)
    before = httpx.get(url + "/metrics").text
    stream = client.chat.completions.create(
        model=IMAGES, messages=messages, max_tokens=2000, stream=True
    )
    got = 0
    for chunk in stream:
        got += bool(chunk.choices and chunk.choices[0].delta.content)
        if got == 3:
            break
    stream.close()
    left = time.perf_counter()
    while engine.busy:
        assert time.perf_counter() - left < 30, "the run did not stop"
        time.sleep(0.02)
    stopped_after = time.perf_counter() - left
    after = httpx.get(url + "/metrics").text
    label = f'{{model="{IMAGES}"}}'
    # The other ~2000 tokens would take 2000 token times (a question whose answer ran to its
    # limit of 64 before, as it does again: greedy); the run stopped at its next token
    # instead, was not answered (no completion tokens counted) and is a 499, not a 500.
    assert stopped_after < 0.1 * 2000 * per_token
    assert _metric(after, "cascade_completion_tokens_total", label) == _metric(
        before, "cascade_completion_tokens_total", label
    )

    def status(s, t):
        return _metric(t, "cascade_requests_total", f'{{model="{IMAGES}",status="{s}"}}')

    assert status(499, after) == status(499, before) + 1
    assert status(500, after) == status(500, before)
    r = client.chat.completions.create(model=IMAGES, messages=messages, max_tokens=2)
    assert r.usage.completion_tokens == 2


def test_an_error_after_the_first_token_is_an_error_event_then_done(tiny_vlm, image_url):
    from cascade.serve.app import create_app

    # A deadline well after the first token (~0.1 s, warmed) and well before 2,000 more (a
    # decode step of the tiny model takes over a millisecond on any CPU).
    app = create_app(small_config(tiny_vlm, request_timeout_s=1.0))
    warm(app)
    body = {
        "model": IMAGES,
        "stream": True,
        "max_tokens": 2000,
        "messages": [_user("Go on and on.", image_url)],
    }
    with running_server(app) as url:
        client = OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=60)
        got = []
        with pytest.raises(openai.APIError) as e:  # the official client raises on the event
            for chunk in client.chat.completions.create(**body):
                got += [c.delta.content for c in chunk.choices if c.delta.content]
        assert got, "content had streamed before the deadline passed"
        assert e.value.body["code"] == "timeout"
        with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=60) as r:
            assert r.status_code == 200  # the status was sent with the first token
            lines = [ln for ln in r.iter_lines() if ln]
        engine = app.state.engine
        while engine.busy:  # the run stops at its next token
            time.sleep(0.02)
        metrics = httpx.get(url + "/metrics").text
    assert lines[-1] == "data: [DONE]" and '"code": "timeout"' in lines[-2]
    assert _metric(metrics, "cascade_requests_total", f'{{model="{IMAGES}",status="504"}}') == 2


def test_a_stream_whose_text_is_not_the_answer_says_so():
    import asyncio

    from cascade.artifacts import Answer
    from cascade.serve.sse import event_stream
    from cascade.streaming import TokenChannel
    from cascade.vlm.decode import TokenEvent

    async def run() -> tuple[list[str], list[int]]:
        channel = TokenChannel()
        work = asyncio.get_running_loop().create_future()
        work.add_done_callback(lambda _: channel.close())
        for i, text in enumerate(["Hel", "lo"]):
            channel.put(TokenEvent(0, i, i, text, -0.1))
        tokens = aiter(channel)
        first = await anext(tokens, None)
        work.set_result(Answer("Goodbye"))  # a draft streamed, another stage answered
        statuses: list[int] = []
        response = event_stream(
            tokens,
            work,
            first,
            model="m",
            cid="c",
            created=0,
            include_usage=False,
            extra=lambda a: {},
            finished=statuses.append,
        )
        return [part async for part in response.body_iterator], statuses

    parts, statuses = asyncio.run(run())
    assert parts[-1] == "data: [DONE]\n\n" and '"stream_mismatch"' in parts[-2]
    assert "".join(parts).count('"content": "') == 3  # role, "Hel", "lo": no "Goodbye"
    assert statuses == [500]
