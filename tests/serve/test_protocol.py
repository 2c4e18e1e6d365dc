"""Request parsing, media URL rules, the bill and the metrics text: no server needed."""

from __future__ import annotations

import json
from contextlib import ExitStack

import numpy as np
import pytest

from cascade.artifacts import Answer, Evidence
from cascade.bill import Bill
from cascade.serve.bill import bill_of, cache_events, openai_usage
from cascade.serve.config import ServeConfig
from cascade.serve.errors import APIError
from cascade.serve.media import load_media_url
from cascade.serve.metrics import Metrics
from cascade.serve.protocol import parse_chat_request
from cascade.serve.uploads import Uploads

from .conftest import chat, data_url, image_part, png_bytes

USER = {"role": "user", "content": "hi"}
TEXT = {"type": "text", "text": "what?"}


def _err(fn, *a) -> APIError:
    with pytest.raises(APIError) as e:
        fn(*a)
    return e.value


def test_parse_takes_last_user_text_and_all_media_once():
    body = {
        "model": "cascade/x",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [
            {"role": "system", "content": "be brief"},
            {
                "role": "user",
                "content": [
                    image_part("data:image/png;base64,AAAA"),
                    {"type": "text", "text": "first?"},
                ],
            },
            {"role": "assistant", "content": "an answer"},
            {
                "role": "user",
                "content": [
                    image_part("data:image/png;base64,AAAA"),
                    {"type": "text", "text": "  and the second?"},
                ],
            },
        ],
    }
    req = parse_chat_request(body)
    assert req.question == "and the second?" and req.turns == 2
    assert [m.url for m in req.media] == ["data:image/png;base64,AAAA"]
    assert req.stream and req.include_usage
    assert req.media[0].param == "messages[1].content[0]"


@pytest.mark.parametrize(
    "body, param",
    [
        ([], None),
        ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
        (
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "audio"}]}]},
            "messages[0].content[0].type",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": [image_part("")]}]},
            "messages[0].content[0].image_url.url",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": [image_part("data:x")]}]},
            "messages",
        ),
        ({"model": "m", "messages": [{"role": "assistant", "content": "hi"}]}, "messages"),
        ({"model": "m", "n": 17, "messages": [USER]}, "n"),
        ({"model": "m", "n": 0, "messages": [USER]}, "n"),
        ({"model": "m", "max_tokens": 0, "messages": [USER]}, "max_tokens"),
        # vLLM answers 400 to a bare-string media URL: so do we
        (
            {
                "model": "m",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": "data:image/png;base64,AAAA"},
                            TEXT,
                        ],
                    }
                ],
            },
            "messages[0].content[0].image_url",
        ),
        (
            {
                "model": "m",
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "video_url", "video_url": "file:///x.mp4"}, TEXT],
                    }
                ],
            },
            "messages[0].content[0].video_url",
        ),
        (
            {
                "model": "m",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image_url",
                                "image_url": {"url": "data:,", "detail": "ultra"},
                            },
                            TEXT,
                        ],
                    }
                ],
            },
            "messages[0].content[0].image_url.detail",
        ),
        (
            {
                "model": "m",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "video_url", "video_url": {"url": "data:,", "num_frames": 8}},
                            TEXT,
                        ],
                    }
                ],
            },
            "messages[0].content[0].video_url.num_frames",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "hi", "colour": 1}]},
            "messages[0].colour",
        ),
        ({"model": "m", "temperature": "hot", "messages": [USER]}, "temperature"),
        ({"model": "m", "top_p": 0, "messages": [USER]}, "top_p"),
        ({"model": "m", "seed": 1.5, "messages": [USER]}, "seed"),
        ({"model": "m", "stop": [1], "messages": [USER]}, "stop[0]"),
        ({"model": "m", "stream": "yes", "messages": [USER]}, "stream"),
        (
            {"model": "m", "stream_options": {"include_usage": 1}, "messages": [USER]},
            "stream_options.include_usage",
        ),
        (
            {"model": "m", "media_io_kwargs": {"num_frames": "invalid"}, "messages": [USER]},
            "media_io_kwargs",
        ),
        ({"model": "m", "media_io_kwargs": "fast", "messages": [USER]}, "media_io_kwargs"),
        ({"model": "m", "temprature": 0, "messages": [USER]}, "temprature"),
        (
            {"model": "m", "messages": [{"role": "user", "content": "bad \ud800 text"}]},
            "messages[0].content",
        ),
        (
            {
                "model": "m",
                "messages": [{"role": "user", "content": [{"type": "text", "text": "\udfff"}]}],
            },
            "messages[0].content[0].text",
        ),
        ({"model": "m\ud800", "messages": [USER]}, "model"),
    ],
)
def test_parse_errors_name_the_field(body, param):
    e = _err(parse_chat_request, body)
    assert e.status == 400 and e.param == param and e.message
    assert set(e.body()["error"]) == {"message", "type", "param", "code"}
    json.dumps(e.body(), ensure_ascii=False).encode("utf-8")  # the error itself is valid UTF-8


def test_unknown_field_suggests_the_known_one():
    e = _err(parse_chat_request, {"model": "m", "temprature": 0, "messages": [USER]})
    assert e.code == "unknown_parameter" and "did you mean 'temperature'" in e.message


@pytest.mark.parametrize(
    "extra",
    [
        {"n": None},
        {"tools": []},
        {"tool_choice": "none"},
        {"response_format": {"type": "text"}},
        {"media_io_kwargs": {}},
        {"user": "u1", "metadata": {"a": "b"}, "store": False},
        {"max_tokens": None},
        {"chat_template_kwargs": None},
    ],
)
def test_no_op_values_are_served(extra):
    req = parse_chat_request({"model": "m", "messages": [USER], **extra})
    assert req.question == "hi" and req.sampling is None and req.n == 1


@pytest.mark.parametrize(
    "extra, expected",
    [
        (
            {"temperature": 0.7, "top_p": 0.9, "seed": 7},
            {"temperature": 0.7, "top_p": 0.9, "seed": 7},
        ),
        (
            {"top_k": 50, "min_p": 0.1, "repetition_penalty": 1.2},
            {"top_k": 50, "min_p": 0.1, "repetition_penalty": 1.2},
        ),
        (
            {"presence_penalty": 0.5, "frequency_penalty": -0.5},
            {"presence_penalty": 0.5, "frequency_penalty": -0.5},
        ),
        ({"n": 3}, {"n": 3}),
        ({"stop": "END"}, {"stop": ("END",)}),
        ({"stop": ["a", "", "b"]}, {"stop": ("a", "b")}),
        ({"stop_token_ids": [7, 9]}, {"stop_token_ids": (7, 9)}),
        ({"logprobs": True, "top_logprobs": 2}, {"logprobs": True, "top_logprobs": 2}),
        ({"temperature": None, "seed": 1}, {"seed": 1, "temperature": 0.0}),
    ],
)
def test_sampling_fields_become_the_requests_settings(extra, expected):
    req = parse_chat_request({"model": "m", "messages": [USER], **extra})
    assert {k: getattr(req.sampling, k) for k in expected} == expected
    assert set(req.sampling_fields) == {k for k, v in extra.items() if v is not None}


def test_response_formats_become_the_requests_settings():
    req = parse_chat_request(
        {"model": "m", "messages": [USER], "response_format": {"type": "json_object"}}
    )
    assert req.sampling.response_format.type == "json_object"
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    req = parse_chat_request(
        {
            "model": "m",
            "messages": [USER],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": schema},
            },
        }
    )
    assert req.sampling.response_format.schema == schema
    assert (
        parse_chat_request(
            {"model": "m", "messages": [USER], "response_format": {"type": "text"}}
        ).sampling
        is None
    )


@pytest.mark.parametrize(
    "fmt, code",
    [
        ({"type": "json_schema"}, "missing_schema"),
        ({"type": "json_schema", "json_schema": {"name": "x"}}, "missing_schema"),
        (
            {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 5}}},
            "invalid_schema",
        ),
    ],
)
def test_a_bad_response_format_is_a_400_naming_the_schema(fmt, code):
    e = _err(parse_chat_request, {"model": "m", "messages": [USER], "response_format": fmt})
    assert (e.status, e.code, e.param) == (400, code, "response_format.json_schema.schema")


@pytest.mark.parametrize(
    "extra, param",
    [
        ({"temperature": 2.5}, "temperature"),
        ({"temperature": -0.1}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": -2}, "top_k"),
        ({"min_p": 1.1}, "min_p"),
        ({"presence_penalty": 2.5}, "presence_penalty"),
        ({"frequency_penalty": -3}, "frequency_penalty"),
        ({"repetition_penalty": 0}, "repetition_penalty"),
        ({"n": 0}, "n"),
        ({"n": 17}, "n"),
        ({"seed": 2**64}, "seed"),
        ({"top_logprobs": 21}, "top_logprobs"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"top_logprobs": 2, "logprobs": False}, "top_logprobs"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"stop_token_ids": [-1]}, "stop_token_ids[0]"),
        ({"logprobs": "yes"}, "logprobs"),
    ],
)
def test_sampling_values_out_of_range_are_a_400_naming_the_field(extra, param):
    e = _err(parse_chat_request, {"model": "m", "messages": [USER], **extra})
    assert (e.status, e.param) == (400, param), e.message
    assert e.message.startswith(param)


@pytest.mark.parametrize(
    "extra, param",
    [
        ({"logit_bias": {"42": 5}}, "logit_bias"),
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"media_io_kwargs": {"video": {"num_frames": 16}}}, "media_io_kwargs"),
        ({"chat_template_kwargs": {"enable_thinking": False}}, "chat_template_kwargs"),
    ],
)
def test_what_the_pipeline_cannot_honour_is_a_400_not_ignored(extra, param):
    e = _err(parse_chat_request, {"model": "m", "messages": [USER], **extra})
    assert (e.status, e.code, e.param) == (400, "unsupported_parameter", param)
    assert "cannot be honoured" in e.message


def test_no_question_is_a_clear_400():
    e = _err(parse_chat_request, chat("m", "   ", image_part("data:image/png;base64,AA")))
    assert e.code == "no_question" and "no text" in e.message


def _load(kind: str, url: str, cfg: ServeConfig, uploads: Uploads | None = None):
    """`load_media_url` with its own request scope: temporary files are gone on return."""
    with ExitStack() as stack:
        return load_media_url(kind, url, cfg, "p", uploads or Uploads(), stack)


def test_data_url_image_decodes_and_limits(tmp_path):
    arr = np.zeros((40, 60, 3), np.uint8)
    cfg = ServeConfig(max_pixels=60 * 40)
    m = _load("image", data_url(png_bytes(arr), "image/png"), cfg)
    assert m.kind == "image" and m.pixels.shape == (40, 60, 3) and len(m.digest) == 64
    e = _err(_load, "image", data_url(png_bytes(np.zeros((41, 60, 3), np.uint8)), "image/png"), cfg)
    assert e.status == 413 and e.code == "image_too_large"
    e = _err(
        _load, "image", "data:image/png;base64," + "A" * 2000, ServeConfig(max_upload_bytes=1000)
    )
    assert e.status == 413 and e.code == "upload_too_large"
    assert _err(_load, "image", "data:image/png;base64,@@@", cfg).code == "invalid_url"
    e = _err(_load, "image", data_url(b"not an image", "image/png"), cfg)
    assert e.code == "invalid_image" and "not a readable image" in e.message
    assert "pi_heif" not in e.message


def test_file_urls_only_under_media_root(tmp_path, media_dir):
    d, _ = media_dir
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.png").write_bytes((d / "text.png").read_bytes())
    (root / "link.png").symlink_to(d / "text.png")
    off = ServeConfig()
    assert _err(_load, "image", (root / "a.png").as_uri(), off).code == "file_url_not_allowed"
    cfg = ServeConfig(media_root=root)
    assert _load("image", (root / "a.png").as_uri(), cfg).pixels is not None
    for url in [
        (d / "text.png").as_uri(),
        f"file://{root}/../{d.name}/text.png",
        (root / "link.png").as_uri(),
        "file://evil.example/etc/passwd",
    ]:
        e = _err(_load, "image", url, cfg)
        assert e.status == 400 and e.code == "file_url_not_allowed", url
        assert str(root) not in e.message and str(d) not in e.message  # no server paths
    assert _err(_load, "image", (root / "missing.png").as_uri(), cfg).code == "file_not_found"
    assert _err(_load, "image", "https://example.com/a.png", cfg).code == "invalid_url"
    # Client mistakes in the path are 400s, not crashes: a NUL byte, a 5,000-character name.
    for url in [
        f"file://{root}/a%00.png",
        f"file://{root}/{'x' * 5000}.png",
        f"file://{root}/{'d/' * 3000}a.png",
    ]:
        e = _err(_load, "image", url, cfg)
        assert e.status == 400 and e.code in ("invalid_url", "file_not_found"), (
            url[:40],
            e.message,
        )
        assert str(root) not in e.message and len(e.message) < 300


def test_video_upload_is_held_while_used_then_deleted(tmp_path, media_dir):
    d, truth = media_dir
    up = Uploads(tmp_path / "up")
    cfg = ServeConfig(max_frames=truth.n_frames)
    url = data_url((d / "sign.mp4").read_bytes(), "video/mp4")
    with ExitStack() as first, ExitStack() as second:
        a = load_media_url("video", url, cfg, "v", up, first)
        b = load_media_url("video", url, cfg, "v", up, second)
        assert a.path == b.path and a.path.suffix == ".mp4" and a.path.parent == up.folder
        first.close()  # one request done: the other still holds the file
        assert a.path.is_file() and up.held() == {a.path.name: 1}
    assert not a.path.exists() and up.held() == {}
    for bad_cfg, status, code in [
        (ServeConfig(max_frames=10), 413, "video_too_long"),
        (ServeConfig(max_pixels=1000), 413, "video_too_large"),
    ]:
        e = _err(_load, "video", url, bad_cfg, up)
        assert (e.status, e.code) == (status, code)
    bad = data_url((d / "corrupt.mp4").read_bytes(), "video/mp4")
    e = _err(_load, "video", bad, cfg, up)
    assert e.code == "invalid_video" and str(up.folder) not in e.message
    assert list(up.folder.iterdir()) == []  # rejected uploads are gone at once


def _answer(**fields) -> Answer:
    return Answer("x", "vlm", Evidence(), Bill(**fields))


def test_bill_and_openai_usage():
    a = _answer(
        visual_tokens=100,
        prompt_tokens=20,
        generated_tokens=5,
        cached_tokens=110,
        prefill_flops=1e9,
        baseline_prefill_flops=8e9,
        baseline_visual_tokens=800,
        cache="hit",
        ttft_s=0.5,
        total_s=0.6,
    )
    b = bill_of(a)
    assert b["visual_tokens_saved"] == 700 and b["visual_token_savings"] == 8.0
    assert b["prefill_savings"] == 8.0 and b["kv_cache"] == "hit"
    u = openai_usage(a)
    assert u == {
        "prompt_tokens": 120,
        "completion_tokens": 5,
        "total_tokens": 125,
        "prompt_tokens_details": {"cached_tokens": 110},
    }
    tool = Answer("3", "tool", Evidence(), Bill.tool(0.9))
    assert openai_usage(tool)["prompt_tokens"] == 0 and bill_of(tool)["kv_cache"] == "off"
    assert cache_events(a) == {"kv_prefix": (1, 1)}


def test_metrics_text_format():
    from prometheus_client.parser import text_string_to_metric_families

    m = Metrics(buckets=(0.1, 1.0))
    m.inc("cascade_requests_total", ("cascade/x", "200"))
    m.inc("cascade_cache_lookups_total", ("embed",), 4)
    m.inc("cascade_cache_hits_total", ("embed",), 3)
    m.observe("cascade_request_latency_seconds", ("cascade/x",), 0.5)
    m.observe("cascade_queue_wait_seconds", ("cascade/x",), 0.05)
    m.gauge("cascade_requests_queued", "waiting", lambda: 3)
    # Parsed back by Prometheus' own parser: the text is valid exposition format.
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(m.render())
        for s in fam.samples
    }
    x = (("model", "cascade/x"),)
    assert samples[("cascade_requests_total", (("model", "cascade/x"), ("status", "200")))] == 1
    assert samples[("cascade_cache_hit_ratio", (("cache", "embed"),))] == 0.75
    assert samples[("cascade_request_latency_seconds_bucket", (("le", "0.1"), *x))] == 0
    assert samples[("cascade_request_latency_seconds_bucket", (("le", "+Inf"), *x))] == 1
    assert samples[("cascade_queue_wait_seconds_bucket", (("le", "0.1"), *x))] == 1
    assert samples[("cascade_requests_queued", ())] == 3
    assert "# TYPE cascade_request_latency_seconds histogram" in m.render()
    assert m.value("cascade_requests_total", ("cascade/x", "200")) == 1
    assert m.value("cascade_requests_total", ("cascade/x", "500")) == 0
