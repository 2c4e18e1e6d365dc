"""Request parsing, media URL rules, the bill and the metrics text: no server needed."""
from __future__ import annotations

import numpy as np
import pytest

from cascade.artifacts import Answer, Box, Detection, Evidence, Frame, Image, OcrLine, Route
from cascade.bill import Bill
from cascade.serve.bill import bill_of, cache_events, openai_usage
from cascade.serve.config import ServeConfig
from cascade.serve.errors import APIError
from cascade.serve.media import load_media_url
from cascade.serve.metrics import Metrics
from cascade.serve.protocol import parse_chat_request

from .conftest import chat, data_url, image_part, png_bytes, video_part


def _err(fn, *a) -> APIError:
    with pytest.raises(APIError) as e:
        fn(*a)
    return e.value


def test_parse_takes_last_user_text_and_all_media_once():
    body = {"model": "cascade/x", "stream": True, "stream_options": {"include_usage": True},
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [image_part("data:image/png;base64,AAAA"),
                                             {"type": "text", "text": "first?"}]},
                {"role": "assistant", "content": "an answer"},
                {"role": "user", "content": [image_part("data:image/png;base64,AAAA"),
                                             {"type": "text", "text": "  and the second?"}]}]}
    req = parse_chat_request(body)
    assert req.question == "and the second?" and req.turns == 2
    assert [m.url for m in req.media] == ["data:image/png;base64,AAAA"]
    assert req.stream and req.include_usage
    assert req.media[0].param == "messages[1].content[0]"


@pytest.mark.parametrize("body, param", [
    ([], None),
    ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
    ({"model": "m", "messages": []}, "messages"),
    ({"model": "m", "messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
    ({"model": "m", "messages": [{"role": "user", "content": [{"type": "audio"}]}]},
     "messages[0].content[0].type"),
    ({"model": "m", "messages": [{"role": "user", "content": [image_part("")]}]},
     "messages[0].content[0].image_url"),
    ({"model": "m", "messages": [{"role": "user", "content": [image_part("data:x")]}]}, "messages"),
    ({"model": "m", "messages": [{"role": "assistant", "content": "hi"}]}, "messages"),
    ({"model": "m", "n": 2, "messages": [{"role": "user", "content": "hi"}]}, "n"),
    ({"model": "m", "max_tokens": 0, "messages": [{"role": "user", "content": "hi"}]}, "max_tokens"),
])
def test_parse_errors_name_the_field(body, param):
    e = _err(parse_chat_request, body)
    assert e.status == 400 and e.param == param and e.message
    assert set(e.body()["error"]) == {"message", "type", "param", "code"}


def test_no_question_is_a_clear_400():
    e = _err(parse_chat_request, chat("m", "   ", image_part("data:image/png;base64,AA")))
    assert e.code == "no_question" and "no text" in e.message


def test_data_url_image_decodes_and_limits(tmp_path):
    arr = np.zeros((40, 60, 3), np.uint8)
    cfg = ServeConfig(max_pixels=60 * 40)
    m = load_media_url("image", data_url(png_bytes(arr), "image/png"), cfg, "p")
    assert m.kind == "image" and m.pixels.shape == (40, 60, 3) and len(m.digest) == 64
    e = _err(load_media_url, "image", data_url(png_bytes(np.zeros((41, 60, 3), np.uint8)), "image/png"),
             cfg, "p")
    assert e.status == 413 and e.code == "image_too_large"
    e = _err(load_media_url, "image", "data:image/png;base64," + "A" * 2000, ServeConfig(max_upload_bytes=1000), "p")
    assert e.status == 413 and e.code == "upload_too_large"
    assert _err(load_media_url, "image", "data:image/png;base64,@@@", cfg, "p").code == "invalid_url"
    assert _err(load_media_url, "image", data_url(b"not an image", "image/png"), cfg, "p").code == "invalid_image"


def test_file_urls_only_under_media_root(tmp_path, media_dir):
    d, _ = media_dir
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.png").write_bytes((d / "text.png").read_bytes())
    (root / "link.png").symlink_to(d / "text.png")
    off = ServeConfig()
    assert _err(load_media_url, "image", (root / "a.png").as_uri(), off, "p").code == "file_url_not_allowed"
    cfg = ServeConfig(media_root=root)
    assert load_media_url("image", (root / "a.png").as_uri(), cfg, "p").pixels is not None
    for url in [(d / "text.png").as_uri(), f"file://{root}/../{d.name}/text.png",
                (root / "link.png").as_uri(), "file://evil.example/etc/passwd"]:
        e = _err(load_media_url, "image", url, cfg, "p")
        assert e.status == 400 and e.code == "file_url_not_allowed", url
    assert _err(load_media_url, "image", (root / "missing.png").as_uri(), cfg, "p").code == "file_not_found"
    assert _err(load_media_url, "image", "https://example.com/a.png", cfg, "p").code == "invalid_url"


def test_video_upload_is_written_once_and_probed(tmp_path, media_dir):
    d, truth = media_dir
    cfg = ServeConfig(upload_dir=tmp_path / "up", max_frames=truth.n_frames)
    url = data_url((d / "sign.mp4").read_bytes(), "video/mp4")
    a, b = load_media_url("video", url, cfg, "v"), load_media_url("video", url, cfg, "v")
    assert a.path == b.path and a.path.suffix == ".mp4" and len(list((tmp_path / "up").iterdir())) == 1
    e = _err(load_media_url, "video", url, ServeConfig(upload_dir=tmp_path / "up", max_frames=10), "v")
    assert e.status == 413 and e.code == "video_too_long"
    e = _err(load_media_url, "video", url, ServeConfig(upload_dir=tmp_path / "up", max_pixels=1000), "v")
    assert e.status == 413 and e.code == "video_too_large"
    bad = data_url((d / "corrupt.mp4").read_bytes(), "video/mp4")
    assert _err(load_media_url, "video", bad, cfg, "v").code == "invalid_video"


def _answer(**fields) -> Answer:
    return Answer("x", "vlm", Evidence(), Bill(**fields))


def test_bill_and_openai_usage():
    a = _answer(visual_tokens=100, prompt_tokens=20, generated_tokens=5, cached_tokens=110,
                prefill_flops=1e9, baseline_prefill_flops=8e9, baseline_visual_tokens=800,
                cache="hit", ttft_s=0.5, total_s=0.6)
    b = bill_of(a)
    assert b["visual_tokens_saved"] == 700 and b["visual_token_savings"] == 8.0
    assert b["prefill_savings"] == 8.0 and b["kv_cache"] == "hit"
    u = openai_usage(a)
    assert u == {"prompt_tokens": 120, "completion_tokens": 5, "total_tokens": 125,
                 "prompt_tokens_details": {"cached_tokens": 110}}
    tool = Answer("3", "tool", Evidence(), Bill.tool(0.9))
    assert openai_usage(tool)["prompt_tokens"] == 0 and bill_of(tool)["kv_cache"] == "off"
    assert cache_events(a) == {"kv_prefix": (1, 1)}


def test_metrics_text_format():
    m = Metrics(buckets=(0.1, 1.0))
    m.inc("cascade_requests_total", ("cascade/x", "200"))
    m.inc("cascade_cache_lookups_total", ("embed",), 4)
    m.inc("cascade_cache_hits_total", ("embed",), 3)
    m.observe_latency("cascade/x", 0.5)
    text = m.render()
    assert 'cascade_requests_total{model="cascade/x",status="200"} 1' in text
    assert 'cascade_cache_hit_ratio{cache="embed"} 0.75' in text
    assert 'cascade_request_latency_seconds_bucket{model="cascade/x",le="0.1"} 0' in text
    assert 'cascade_request_latency_seconds_bucket{model="cascade/x",le="+Inf"} 1' in text
    assert "# TYPE cascade_request_latency_seconds histogram" in text
    for line in text.splitlines():  # every sample line is `name{labels} number`
        if not line.startswith("#"):
            float(line.rsplit(" ", 1)[1])
