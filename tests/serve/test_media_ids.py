"""The media-id store (`uuid` on a content part): bounded in bytes, least recently used out
first, one id one piece of media."""

from __future__ import annotations

import hashlib

import pytest

from cascade.serve.errors import APIError
from cascade.serve.media import Payload
from cascade.serve.media_ids import MediaIds


def payload(data: bytes, kind: str = "image") -> Payload:
    return Payload(kind, data, hashlib.sha256(data).hexdigest())


def test_kept_media_come_back_by_uuid_and_the_least_recent_goes_first():
    ids = MediaIds(max_bytes=250)
    ids.keep("a", payload(b"a" * 100))
    ids.keep("b", payload(b"b" * 100))
    assert ids.resolve("a", "image", None, "p").data == b"a" * 100  # a is now the most recent
    ids.keep("c", payload(b"c" * 100))  # 300 bytes: the least recently used (b) goes
    assert ids.used == 200 and len(ids) == 2
    assert ids.resolve("c", "image", None, "p").data == b"c" * 100
    with pytest.raises(APIError) as e:
        ids.resolve("b", "image", None, "messages[1].content[0]")
    assert e.value.status == 400 and e.value.param == "messages[1].content[0]"
    assert "no media with uuid 'b'" in str(e.value) and "resend the media" in str(e.value)


def test_one_uuid_names_one_piece_of_media():
    ids = MediaIds(max_bytes=1000)
    ids.keep("x", payload(b"first"))
    assert ids.resolve("x", "image", payload(b"first"), "p").data == b"first"  # the same again
    with pytest.raises(APIError) as e:
        ids.resolve("x", "image", payload(b"second"), "messages[0].content[2]")
    assert e.value.status == 400 and e.value.param == "messages[0].content[2].uuid"
    assert "already names other media" in str(e.value)
    with pytest.raises(
        APIError, match="names the media of an image part, and this part is a video part"
    ):
        ids.resolve("x", "video", None, "p")


def test_media_larger_than_the_store_are_not_kept_and_zero_keeps_nothing():
    ids = MediaIds(max_bytes=10)
    ids.keep("big", payload(b"x" * 11))
    assert len(ids) == 0 and ids.used == 0
    off = MediaIds(max_bytes=0)
    off.keep("a", payload(b"a"))
    assert len(off) == 0


def test_a_conversation_names_each_uuid_once_with_its_bytes_where_they_came():
    from cascade.serve.protocol import parse_chat_request

    url = "data:image/png;base64,AAAA"
    req = parse_chat_request(
        {
            "model": "m",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "uuid": "a"},
                        {"type": "image_url", "image_url": {"url": url}, "uuid": "a"},
                        {"type": "image_url", "image_url": None, "uuid": "b"},
                        {"type": "text", "text": "q"},
                    ],
                }
            ],
        }
    )
    assert [(m.url, m.uuid, m.param) for m in req.media] == [
        (url, "a", "messages[0].content[1]"),
        (None, "b", "messages[0].content[2]"),
    ]


def test_a_uuid_sent_alone_that_names_nothing_is_refused_before_it_queues():
    from cascade.serve.config import ServeConfig
    from cascade.serve.engine import Engine
    from cascade.serve.protocol import parse_chat_request

    engine = Engine(ServeConfig(tiny=True, shipped=False, pipelines={"doc_qa": "doc_qa"}))
    try:
        served = engine.get("cascade/doc_qa")
        part = {"type": "image_url", "image_url": None, "uuid": "never-sent"}
        req = parse_chat_request(
            {
                "model": "cascade/doc_qa",
                "messages": [
                    {
                        "role": "user",
                        "content": [part, {"type": "text", "text": "What does it say?"}],
                    }
                ],
            }
        )
        with pytest.raises(APIError) as e:
            engine.check_request(req, served)  # what runs before the request takes a queue place
        assert (e.value.status, e.value.code) == (400, "media_not_cached")
        engine.media_ids.keep("never-sent", payload(b"now it was"))
        engine.check_request(req, served)
    finally:
        engine.close()
