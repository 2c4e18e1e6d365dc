"""The OpenAI chat-completions request, checked by hand so every mistake gets a precise 400.

Accepted: `model`, `messages` (roles system/developer/user/assistant/tool; content a string or a
list of parts `text`, `image_url`, `video_url` as vLLM accepts them), `stream`,
`stream_options.include_usage`, `max_tokens`/`max_completion_tokens` (passed to the pipeline when
it has a `max_new_tokens` input). Sampling knobs (temperature, top_p, ...) are accepted and ignored:
the cascade decodes greedily. The question is the text of the last user message; the media are
every image/video part of the conversation's user messages, in order, each distinct URL once, so
a follow-up turn that only repeats the history reaches the same content-keyed caches.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import APIError

__all__ = ["ChatRequest", "MediaRef", "parse_chat_request"]

_ROLES = {"system", "developer", "user", "assistant", "tool"}


@dataclass(frozen=True)
class MediaRef:
    kind: Literal["image", "video"]
    url: str
    param: str  # where it sits in the request, e.g. "messages[0].content[1]"


@dataclass
class ChatRequest:
    model: str
    question: str
    media: list[MediaRef] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    turns: int = 1  # user messages so far


def _bad(message: str, param: str | None = None, code: str = "invalid_request") -> APIError:
    return APIError(400, message, code=code, param=param)


def _url_of(part: dict[str, Any], key: str, param: str) -> str:
    value = part.get(key)
    url = value.get("url") if isinstance(value, dict) else value
    if not isinstance(url, str) or not url:
        raise _bad(f"{param}.{key}: expected {{\"url\": \"data:...\" or \"file://...\"}}", f"{param}.{key}")
    return url


def _parts(content: Any, param: str) -> tuple[list[str], list[MediaRef]]:
    if content is None:
        return [], []
    if isinstance(content, str):
        return [content], []
    if not isinstance(content, list):
        raise _bad(f"{param}: content must be a string or a list of parts", param)
    texts, media = [], []
    for j, part in enumerate(content):
        p = f"{param}[{j}]"
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise _bad(f"{p}: each part must be an object with a 'type'", p)
        kind = part["type"]
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise _bad(f"{p}.text: expected a string", f"{p}.text")
            texts.append(part["text"])
        elif kind == "image_url":
            media.append(MediaRef("image", _url_of(part, "image_url", p), p))
        elif kind == "video_url":
            media.append(MediaRef("video", _url_of(part, "video_url", p), p))
        else:
            raise _bad(f"{p}.type: unsupported part type '{kind}'; use text, image_url or video_url",
                       f"{p}.type")
    return texts, media


def _positive_int(body: dict[str, Any], key: str) -> int | None:
    v = body.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise _bad(f"'{key}' must be a positive integer, got {v!r}", key)
    return v


def parse_chat_request(body: Any) -> ChatRequest:
    """Check a decoded JSON body; raises `APIError(400)` naming the offending field."""
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object", code="invalid_json")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("'model' is required: one of the ids GET /v1/models lists", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("'messages' must be a non-empty list", "messages")
    n = body.get("n", 1)
    if n != 1:
        raise _bad("only n=1 is supported", "n")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad("'stream' must be true or false", "stream")
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise _bad("'stream_options' must be an object", "stream_options")
    max_tokens = _positive_int(body, "max_completion_tokens") or _positive_int(body, "max_tokens")

    media: list[MediaRef] = []
    seen: set[tuple[str, str]] = set()
    question, turns = None, 0
    for i, msg in enumerate(messages):
        param = f"messages[{i}]"
        if not isinstance(msg, dict) or msg.get("role") not in _ROLES:
            raise _bad(f"{param}: each message needs a 'role' in {sorted(_ROLES)}", f"{param}.role")
        texts, parts = _parts(msg.get("content"), f"{param}.content")
        if msg["role"] != "user":
            continue
        turns += 1
        question = " ".join(t.strip() for t in texts if t.strip())
        for m in parts:
            if (m.kind, m.url) not in seen:
                seen.add((m.kind, m.url))
                media.append(m)
    if turns == 0:
        raise _bad("no user message: the question comes from the last user message", "messages")
    if not question:
        raise _bad("no question: the last user message has no text", "messages", code="no_question")
    return ChatRequest(model, question, media, stream, bool(opts.get("include_usage", False)),
                       max_tokens, turns)
