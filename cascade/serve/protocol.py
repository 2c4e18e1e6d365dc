"""The OpenAI chat-completions request, checked by hand so every mistake gets a precise 400.

Accepted: `model`, `messages` (roles system/developer/user/assistant/tool; content a string or a
list of parts `text`, `image_url`, `video_url`, the media parts as objects `{"url": ...}` as vLLM
wants them), `stream`, `stream_options.include_usage`, `max_tokens`/`max_completion_tokens`, and
every other field OpenAI or vLLM defines, each type-checked. The question is the text of the last
user message; the earlier user/assistant turns are its `history` ((question, answer) pairs, which
the VLM's prompt puts after the media, so the media's KV prefix is still reused); the media are
every image/video part of the conversation's user messages, in order, each distinct URL once, so
a follow-up turn that repeats the history reaches the same content-keyed caches.

A field is never silently ignored. The cascade decodes greedily, one choice, plain text: a field
set to a value that changes that (`temperature: 0.7`, `logprobs: true`, `stop`, `tools`, ...)
answers 400 `unsupported_parameter` rather than being dropped; the same field at its no-op value
(`temperature: 0` or `1`, `top_p: 1`, `n: 1` or null ...) is fine. Unknown fields are refused as
OpenAI does ("did you mean"). `UNHONOURED` is the one table to shrink as the VLM runtime learns
sampling, logprobs and stop sequences.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from ..errors import did_you_mean
from .errors import APIError

__all__ = ["ChatRequest", "MediaRef", "parse_chat_request", "UNHONOURED"]

_ROLES = {"system", "developer", "user", "assistant", "tool"}
_MESSAGE_KEYS = {"role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content",
                 "refusal", "function_call", "audio"}
_URL_KEYS = {"image_url": {"url", "detail"}, "video_url": {"url"}}
_DETAIL = {"auto", "low", "high"}  # a hint: the cascade chooses the resolution itself


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
    history: list[tuple[str, str]] = field(default_factory=list)  # earlier (question, answer) turns


def _bad(message: str, param: str | None = None, code: str = "invalid_request") -> APIError:
    return APIError(400, message, code=code, param=param)


def _short(v: Any, n: int = 60) -> str:
    """A client value quoted in a message: repr (escapes control characters and lone
    surrogates), cut short so a 5,000-character value does not become a 5,000-character error."""
    r = repr(v)
    return r if len(r) <= n else r[: n - 3] + "..."


def _name(key: Any) -> str:
    """A client-chosen field name as a `param`: escaped like `_short`, without the quotes."""
    return _short(str(key), 66)[1:-1]


def _utf8(text: str, param: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate from a "\ud800" JSON escape
        raise _bad(f"{param}: not valid UTF-8 text (lone surrogate at character {e.start})",
                   param, code="invalid_text") from None
    return text


# -- field types -------------------------------------------------------------------------------
def _number(lo: float, hi: float, lo_open: bool = False) -> Callable[[Any, str], None]:
    def check(v: Any, key: str) -> None:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
            and (v > lo if lo_open else v >= lo) and v <= hi
        if not ok:
            raise _bad(f"'{key}' must be a number in {'(' if lo_open else '['}{lo:g}, {hi:g}], "
                       f"got {_short(v)}", key)
    return check


def _integer(lo: int, hi: int | None = None) -> Callable[[Any, str], None]:
    def check(v: Any, key: str) -> None:
        if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
            rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
            raise _bad(f"'{key}' must be an integer {rng}, got {_short(v)}", key)
    return check


def _of(*types: type, what: str) -> Callable[[Any, str], None]:
    def check(v: Any, key: str) -> None:
        if not isinstance(v, types) or isinstance(v, bool) and bool not in types:
            raise _bad(f"'{key}' must be {what}, got {_short(v)}", key)
    return check


def _stop(v: Any, key: str) -> None:
    if not (isinstance(v, str) or isinstance(v, list) and all(isinstance(s, str) for s in v)):
        raise _bad(f"'{key}' must be a string or a list of strings, got {_short(v)}", key)


# Every field the request may carry: its type check. null is always allowed (= omitted).
_FIELDS: dict[str, Callable[[Any, str], None]] = {
    "model": _of(str, what="a string"), "messages": _of(list, what="a list"),
    "stream": _of(bool, what="true or false"), "stream_options": _of(dict, what="an object"),
    "max_tokens": _integer(1), "max_completion_tokens": _integer(1), "n": _integer(1),
    "temperature": _number(0, 2), "top_p": _number(0, 1, lo_open=True), "top_k": _integer(-1),
    "min_p": _number(0, 1), "presence_penalty": _number(-2, 2), "frequency_penalty": _number(-2, 2),
    "repetition_penalty": _number(0, 100, lo_open=True), "seed": _integer(-(2**63), 2**64 - 1),
    "stop": _stop, "logprobs": _of(bool, what="true or false"), "top_logprobs": _integer(0, 20),
    "logit_bias": _of(dict, what="an object"), "response_format": _of(dict, what="an object"),
    "tools": _of(list, what="a list"), "tool_choice": _of(str, dict, what="a string or an object"),
    "parallel_tool_calls": _of(bool, what="true or false"),
    "user": _of(str, what="a string"), "metadata": _of(dict, what="an object"),
    "store": _of(bool, what="true or false"), "service_tier": _of(str, what="a string"),
    "media_io_kwargs": _of(dict, what="an object"),
    "mm_processor_kwargs": _of(dict, what="an object"),
    "chat_template_kwargs": _of(dict, what="an object"),
}

# Fields the pipeline cannot honour yet: the values that change nothing (the request is served),
# and why any other value is refused. Phase 2 of the VLM runtime removes rows as it learns them.
_GREEDY = "the cascade decodes greedily (it does not sample yet)"
UNHONOURED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "n": (lambda v: v == 1, "one answer per request: send n=1 or leave it out"),
    "temperature": (lambda v: v in (0, 1), f"{_GREEDY}: use temperature 0 (or leave it out)"),
    "top_p": (lambda v: v == 1, _GREEDY),
    "top_k": (lambda v: v in (-1, 0, 1), _GREEDY),
    "min_p": (lambda v: v == 0, _GREEDY),
    "presence_penalty": (lambda v: v == 0, _GREEDY),
    "frequency_penalty": (lambda v: v == 0, _GREEDY),
    "repetition_penalty": (lambda v: v == 1, _GREEDY),
    "stop": (lambda v: v in ("", []), "stop sequences are not supported yet"),
    "logprobs": (lambda v: v is False, "log-probabilities are not returned yet"),
    "top_logprobs": (lambda v: v == 0, "log-probabilities are not returned yet"),
    "logit_bias": (lambda v: v == {}, "logit_bias is not supported"),
    "response_format": (lambda v: v.get("type") == "text",
                        "only plain text answers ({\"type\": \"text\"})"),
    "tools": (lambda v: v == [], "tool calling is not supported"),
    "tool_choice": (lambda v: v in ("none", "auto"), "tool calling is not supported"),
    "media_io_kwargs": (lambda v: v == {}, "frame sampling and image sizes are set by the "
                        "pipeline (its video_frames / thumbnails params), not per request"),
    "mm_processor_kwargs": (lambda v: v == {}, "the VLM's preprocessing is set by the pipeline"),
    "chat_template_kwargs": (lambda v: v == {}, "the pipeline builds the prompt"),
}


def _check_fields(body: dict[str, Any]) -> None:
    for key, value in body.items():
        if key not in _FIELDS:
            raise _bad(f"unrecognized request argument {_short(key, 40)}"
                       f"{did_you_mean(str(key), _FIELDS)}", _name(key), code="unknown_parameter")
        if value is None:
            continue
        _FIELDS[key](value, key)
        if key in UNHONOURED:
            fine, why = UNHONOURED[key]
            if not fine(value):
                raise _bad(f"'{key}' = {_short(value)} cannot be honoured: {why}", key,
                           code="unsupported_parameter")


# -- messages ------------------------------------------------------------------------------------
def _url_of(part: dict[str, Any], key: str, param: str) -> str:
    value = part.get(key)
    where = f"{param}.{key}"
    if not isinstance(value, dict):  # vLLM answers 400 to a bare string too
        raise _bad(f"{where}: expected an object {{\"url\": \"data:...\" or \"file://...\"}}, "
                   f"got {type(value).__name__}", where)
    extra = set(value) - _URL_KEYS[key]
    if extra:
        name = sorted(extra)[0]
        raise _bad(f"{where}: unknown field {_short(name, 40)}; allowed: "
                   f"{', '.join(sorted(_URL_KEYS[key]))}", f"{where}.{_name(name)}")
    if value.get("detail") not in (None, *_DETAIL):
        raise _bad(f"{where}.detail: expected one of {sorted(_DETAIL)}, got "
                   f"{_short(value['detail'])}", f"{where}.detail")
    url = value.get("url")
    if not isinstance(url, str) or not url:
        raise _bad(f"{where}.url: expected a non-empty URL string", f"{where}.url")
    return url


def _parts(content: Any, param: str) -> tuple[list[str], list[MediaRef]]:
    if content is None:
        return [], []
    if isinstance(content, str):
        return [_utf8(content, param)], []
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
            texts.append(_utf8(part["text"], f"{p}.text"))
        elif kind in _URL_KEYS:
            media.append(MediaRef("image" if kind == "image_url" else "video",
                                  _url_of(part, kind, p), p))
        else:
            raise _bad(f"{p}.type: unsupported part type {_short(kind, 40)}; use text, image_url "
                       "or video_url", f"{p}.type")
    return texts, media


def parse_chat_request(body: Any) -> ChatRequest:
    """Check a decoded JSON body; raises `APIError(400)` naming the offending field."""
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object", code="invalid_json")
    _check_fields(body)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("'model' is required: one of the ids GET /v1/models lists", "model")
    _utf8(model, "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("'messages' must be a non-empty list", "messages")
    opts = body.get("stream_options") or {}
    if set(opts) - {"include_usage"}:
        raise _bad("'stream_options' takes include_usage only", "stream_options")
    if not isinstance(opts.get("include_usage", False), bool):
        raise _bad("'stream_options.include_usage' must be true or false",
                   "stream_options.include_usage")
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")

    media: list[MediaRef] = []
    seen: set[tuple[str, str]] = set()
    said: list[tuple[str, str, str]] = []  # (role, text, param) of user and assistant messages
    for i, msg in enumerate(messages):
        param = f"messages[{i}]"
        if not isinstance(msg, dict) or msg.get("role") not in _ROLES:
            raise _bad(f"{param}: each message needs a 'role' in {sorted(_ROLES)}", f"{param}.role")
        extra = set(msg) - _MESSAGE_KEYS
        if extra:
            name = sorted(extra)[0]
            raise _bad(f"{param}: unknown field {_short(name, 40)}", f"{param}.{_name(name)}")
        texts, parts = _parts(msg.get("content"), f"{param}.content")
        if msg["role"] not in ("user", "assistant"):
            continue
        said.append((msg["role"], " ".join(t.strip() for t in texts if t.strip()), param))
        if msg["role"] == "user":
            for m in parts:
                if (m.kind, m.url) not in seen:
                    seen.add((m.kind, m.url))
                    media.append(m)
    turns = sum(role == "user" for role, _, _ in said)
    if turns == 0:
        raise _bad("no user message: the question comes from the last user message", "messages")
    history, question = _conversation(said)
    return ChatRequest(model, question, media, bool(body.get("stream")),
                       bool(opts.get("include_usage", False)), max_tokens, turns, history)


def _conversation(said: list[tuple[str, str, str]]) -> tuple[list[tuple[str, str]], str]:
    """(earlier (question, answer) turns, the question) from the user and assistant messages in
    order. Consecutive messages of one role are one turn (their texts joined by a new line), as a
    chat template would show them one after the other."""
    groups: list[tuple[str, list[str], str]] = []  # (role, texts, param of its first message)
    for role, text, param in said:
        if groups and groups[-1][0] == role:
            groups[-1][1].append(text)
        else:
            groups.append((role, [text], param))
    if groups[0][0] == "assistant":
        raise _bad(f"{groups[0][2]}: an assistant message must answer an earlier user message",
                   groups[0][2], code="invalid_conversation")
    if groups[-1][0] == "assistant":
        raise _bad(f"{groups[-1][2]}: the conversation must end with the user's question; "
                   "continuing an assistant message is not supported", groups[-1][2],
                   code="invalid_conversation")
    joined = [("\n".join(t for t in texts if t), param) for _, texts, param in groups]
    for text, param in joined[:-1:2]:
        if not text:
            raise _bad(f"{param}: this earlier user turn has no text; each question goes into "
                       "the prompt as text", param, code="no_question")
    if not joined[-1][0]:
        raise _bad("no question: the last user message has no text", "messages", code="no_question")
    history = [(joined[k][0], joined[k + 1][0]) for k in range(0, len(joined) - 1, 2)]
    return history, joined[-1][0]
