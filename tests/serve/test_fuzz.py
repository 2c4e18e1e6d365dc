"""Property test against the real app on a real port: whatever a client sends — malformed JSON,
wrong types, NaN, lone surrogates, odd URLs, unknown fields — the answer is a well-formed OpenAI
error (4xx) or an answer, never a 500, and no error message shows a server path. Requests are
valid ones with up to three mutations, so most get past parsing. CASCADE_FUZZ_EXAMPLES=500 for
a longer run than the suite's 60.
"""

from __future__ import annotations

import json
import os

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from .conftest import IMAGES, VIDEO, data_url, running_server, small_config, warm

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(media_dir, tiny_vlm, tmp_path_factory):
    from cascade.serve.app import create_app

    d, _ = media_dir
    uploads = tmp_path_factory.mktemp("fuzz-uploads")
    app = create_app(small_config(tiny_vlm, media_root=d, upload_dir=uploads, max_queue=256))
    warm(app)
    with running_server(app) as url, httpx.Client(base_url=url, timeout=120) as client:
        yield client, d, uploads


# Text with what breaks naive servers: lone surrogates, NUL, very long runs.
TEXT = st.one_of(
    st.text(max_size=20),
    st.text(st.characters(codec=None, categories=["Cs", "Cc", "Lo"]), max_size=8),
    st.builds(lambda c, n: c * n, st.characters(), st.integers(1000, 6000)),
)
LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
)
JSON = st.recursive(
    LEAF,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(TEXT, kids, max_size=3),
    max_leaves=8,
)


def _urls(root: str, png: str):
    return st.one_of(
        st.just(png),
        st.just(f"file://{root}/text.png"),
        st.builds(lambda t: f"file://{root}/{t}", TEXT),
        st.builds(lambda t: f"data:image/png;base64,{t}", TEXT),
        st.builds(lambda t: f"data:{t}", TEXT),
        st.sampled_from(
            [
                "file:///etc/passwd",
                "http://127.0.0.1:1/x",
                f"file://{root}/%00.png",
                f"file://{root}/{'x' * 5000}.png",
                "data:video/mp4;base64,AAAA",
            ]
        ),
        TEXT,
    )


def _bodies(root: str, png: str):
    """A valid request with up to three mutations, so most reach deep into the server."""
    url, field = (
        _urls(root, png),
        st.sampled_from(
            [
                "n",
                "temperature",
                "top_p",
                "max_tokens",
                "stream",
                "stop",
                "logprobs",
                "seed",
                "media_io_kwargs",
                "stream_options",
                "tools",
                "x_unknown",
            ]
        ),
    )
    valid = {
        "n": st.sampled_from([None, 1]),
        "temperature": st.sampled_from([0, 1, None]),
        "stream": st.booleans(),
        "seed": st.integers(0, 2**31),
    }

    @st.composite
    def body(draw):
        model = draw(st.sampled_from([IMAGES, VIDEO]))
        kind = "image_url" if model == IMAGES else "video_url"
        part = {
            "type": kind,
            kind: {
                "url": draw(url)
                if draw(st.booleans())
                else png
                if kind == "image_url"
                else f"file://{root}/sign.mp4"
            },
        }
        text = {"type": "text", "text": draw(st.one_of(st.just("What is it?"), TEXT))}
        msg = {"role": "user", "content": [part, text]}
        out = {"model": model, "messages": [msg]}
        for _ in range(draw(st.integers(0, 3))):
            what = draw(
                st.sampled_from(
                    ["field", "valid", "part", "content", "model", "role", "history", "media_kwarg"]
                )
            )
            if what == "field":
                out[draw(field)] = draw(JSON)
            elif what == "valid":
                key = draw(st.sampled_from(sorted(valid)))
                out[key] = draw(valid[key])
            elif what == "part":
                part[kind] = draw(st.one_of(url, JSON))
            elif what == "content":
                msg["content"] = draw(st.one_of(TEXT, JSON))
            elif what == "model":
                out["model"] = draw(st.one_of(TEXT, LEAF))
            elif what == "role":
                msg["role"] = draw(st.one_of(TEXT, LEAF))
            elif what == "history":
                out["messages"] = [msg, {"role": "assistant", "content": draw(JSON)}, dict(msg)]
            else:
                part[kind] = {"url": png, draw(TEXT): draw(JSON)}
        return out

    return body()


def _check(r: httpx.Response, secrets: list[str]) -> None:
    assert r.status_code < 500, r.text[:500]
    if r.status_code >= 400:
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"} and err["message"]
        assert not any(s in err["message"] for s in secrets), err["message"][:300]


@settings(
    max_examples=int(os.environ.get("CASCADE_FUZZ_EXAMPLES", 60)),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
@given(data=st.data())
def test_no_request_makes_a_500_or_shows_a_server_path(served, data):
    client, d, uploads = served
    png = data_url((d / "text.png").read_bytes(), "image/png")
    body = data.draw(_bodies(str(d), png))
    r = client.post(
        "/v1/chat/completions",
        content=json.dumps(body, allow_nan=True).encode(),
        headers={"content-type": "application/json"},
    )
    event(f"HTTP {r.status_code}")  # --hypothesis-show-statistics: how many got how far
    _check(r, [str(uploads)])
    assert list(uploads.iterdir()) == []


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    raw=st.one_of(
        st.binary(max_size=200),
        st.builds(lambda b: b'{"model": "' + b + b'", "messages": []}', st.binary(max_size=20)),
    )
)
def test_no_byte_string_makes_a_500(served, raw):
    client, _, uploads = served
    _check(client.post("/v1/chat/completions", content=raw), [str(uploads)])


def test_a_valid_request_from_the_same_blocks_is_answered(served):
    """The property is not vacuous: the building blocks also make requests that are served."""
    client, d, _ = served
    png = data_url((d / "text.png").read_bytes(), "image/png")
    body = {
        "model": IMAGES,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": png}},
                    {"type": "text", "text": "q?"},
                ],
            }
        ],
    }
    assert client.post("/v1/chat/completions", json=body).status_code == 200
