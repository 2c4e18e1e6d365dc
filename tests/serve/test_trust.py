"""The server's trust boundary on a real uvicorn: uploads do not outlive their request, requests
are refused rather than half-honoured, client mistakes are 4xx naming the field without server
paths, and a truncated video answers with a warning.
"""

from __future__ import annotations

import httpx
import pytest

from .conftest import (
    IMAGES,
    VIDEO,
    chat,
    data_url,
    image_part,
    running_server,
    small_config,
    video_part,
    warm,
)


@pytest.fixture(scope="module")
def server(media_dir, tmp_path_factory, tiny_vlm):
    from cascade.serve.app import create_app

    d, truth = media_dir
    uploads = tmp_path_factory.mktemp("uploads")
    app = create_app(
        small_config(
            tiny_vlm,
            media_root=d,
            upload_dir=uploads,
            max_frames=500,
            max_upload_bytes=3 << 20,
            workers=2,
        )
    )
    warm(app)
    with running_server(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        yield client, d, uploads


def _post(client, body) -> httpx.Response:
    return client.post(
        "/v1/chat/completions", **({"content": body} if isinstance(body, bytes) else {"json": body})
    )


def _refused(r: httpx.Response, status: int, param: str | None = None) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    if param is not None:
        assert err["param"] == param, err
    return err


def _server_errors(client) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in client.get("/metrics").text.splitlines()
        if line.startswith("cascade_requests_total") and 'status="500"' in line
    )


def test_uploads_are_deleted_after_good_and_rejected_requests(server, media_dir):
    client, d, uploads = server
    video = data_url((d / "sign.mp4").read_bytes(), "video/mp4")
    corrupt = data_url((d / "corrupt.mp4").read_bytes(), "video/mp4")
    rejected = [
        chat(VIDEO, "q?", video_part(corrupt)),  # not a video
        chat(IMAGES, "q?", video_part(video)),  # a video to an image pipeline
        chat(
            VIDEO, "q?", video_part(video), video_part(corrupt)
        ),  # refused before any upload is written
        chat(VIDEO, "CRASH now", video_part(video)),  # the pipeline fails
    ]
    for body in rejected:
        assert _post(client, body).status_code in (400, 500)
        assert list(uploads.iterdir()) == []
    assert (
        _post(client, chat(VIDEO, "What does the sign say?", video_part(video))).status_code == 200
    )
    assert (
        list(uploads.iterdir()) == []
    )  # the next turn re-sends it; the caches are keyed by pixels


def test_several_videos_are_refused_not_silently_dropped(server, media_dir):
    client, d, _ = server
    first = (d / "sign.mp4").as_uri()
    (d / "sign2.mp4").write_bytes(
        (d / "sign.mp4").read_bytes() + b"\0"
    )  # another file, same frames
    body = {
        "model": VIDEO,
        "messages": [
            {
                "role": "user",
                "content": [video_part(first), {"type": "text", "text": "What is it?"}],
            },
            {"role": "assistant", "content": "a sign"},
            {
                "role": "user",
                "content": [
                    video_part((d / "sign2.mp4").as_uri()),
                    {"type": "text", "text": "And this one?"},
                ],
            },
        ],
    }
    err = _refused(_post(client, body), 400, "messages[2].content[0]")
    assert err["code"] == "too_many_videos" and "2 different ones" in err["message"]
    # The same video repeated in a follow-up turn is one video.
    body["messages"][2]["content"][0] = video_part(first)
    assert _post(client, body).status_code == 200


def test_max_tokens_is_honoured_and_null_fields_are_served(server, media_dir):
    client, d, _ = server
    r = _post(client, chat(IMAGES, "What?", image_part((d / "text.png").as_uri()), max_tokens=3))
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] <= 3
    ok = _post(
        client,
        chat(
            IMAGES,
            "What?",
            image_part((d / "text.png").as_uri()),
            n=None,
            temperature=0,
            max_tokens=None,
        ),
    )
    assert ok.status_code == 200


def test_client_mistakes_are_4xx_naming_the_field_without_server_paths(server, media_dir):
    client, d, uploads = server
    png = (d / "text.png").as_uri()
    raw_surrogate = (
        b'{"model": "%s", "messages": [{"role": "user", "content": [{"type": '
        b'"image_url", "image_url": {"url": "%s"}}, {"type": "text", "text": '
        b'"what \\ud800 is it?"}]}]}' % (IMAGES.encode(), png.encode())
    )
    cases = [
        (raw_surrogate, 400, "messages[0].content[1].text"),
        (b'{"model": "\xff\xfe", "messages": []}', 400, None),  # not UTF-8
        (chat(IMAGES, "q?", image_part(f"file://{d}/text%00.png")), 400, "messages[0].content[0]"),
        (
            chat(IMAGES, "q?", image_part(f"file://{d}/{'x' * 5000}.png")),
            400,
            "messages[0].content[0]",
        ),
        (chat(IMAGES, "   ", image_part(png)), 400, "messages"),
        (
            chat(IMAGES, "q?", image_part("data:image/png;base64," + "QUJD" * 10)),
            400,
            "messages[0].content[0]",
        ),
        (chat("cascade/" + "m" * 5000, "q?", image_part(png)), 404, "model"),
        (chat(IMAGES, "q?", image_part(png), temperature="hot"), 400, "temperature"),
        (
            chat(VIDEO, "q?", video_part(data_url(b"plain text, not a video", "video/mp4"))),
            400,
            "messages[0].content[0]",
        ),
    ]
    errors_before = _server_errors(client)
    for body, status, param in cases:
        r = _post(client, body)
        err = _refused(r, status, param)
        assert str(d) not in err["message"] and str(uploads) not in err["message"], err
        assert len(err["message"]) < 600 and "Traceback" not in err["message"]
    assert _server_errors(client) == errors_before


def test_truncated_video_answers_with_a_warning(server, media_dir):
    from tests.media.videos import remux

    client, d, _ = server
    fast = d / "fast.mp4"  # a fast-start MP4 (index first) cut short: its first part decodes
    remux(d / "sign.mp4", fast, movflags="faststart")
    data = fast.read_bytes()
    (d / "cut.mp4").write_bytes(data[: len(data) * 6 // 10])
    r = _post(client, chat(VIDEO, "What does the sign say?", video_part((d / "cut.mp4").as_uri())))
    assert r.status_code == 200, r.text
    warnings = r.json()["cascade"]["warnings"]
    assert len(warnings) == 1 and warnings[0].startswith("frames: video truncated or damaged")
    frames = next(s for s in r.json()["cascade"]["trace"]["stages"] if s["name"] == "frames")
    assert frames["warnings"] and str(d) not in warnings[0]
    whole = _post(client, chat(VIDEO, "What does the sign say?", video_part(fast.as_uri())))
    assert whole.status_code == 200 and whole.json()["cascade"]["warnings"] == []
