"""A chat-completions request body -> `ChatRequest`, or a 400 that names the field.

The body is validated by the published models (`schema.ChatCompletionRequest`); a validation
error becomes one OpenAI-style 400 whose `param` is the field's path in the request
(`messages[0].content[1].image_url.url`) and whose message says what was expected and what came,
quoted short and escaped. Unknown fields are refused as OpenAI does, with a did-you-mean.

The sampling fields (temperature, top_p, top_k, min_p, seed, the three penalties, n, stop,
stop_token_ids, logprobs, top_logprobs) and `response_format` (json_object, json_schema: decoded
under a grammar) become the request's `SamplingParams`
(`ChatRequest.sampling`, None when the request sets none of them: greedy), which the engine hands
to the pipeline's `sampling` input; their ranges are the schema's, and a combination the runtime
refuses (top_logprobs without logprobs) is a 400 naming the field.

A field is never silently ignored. A field set to a value the pipelines cannot honour (`tools`,
`logit_bias`, `tool_choice` "required" ...) answers 400 `unsupported_parameter` rather
than being dropped; the same field at its no-op value (`tools: []`, `tool_choice: none` ...) is
fine. `UNHONOURED` is the one table of them.

The question is the text of the last user message; the earlier user/assistant turns are its
`history` ((question, answer) pairs, which the VLM's prompt puts after the media, so the media's KV
prefix is still reused); the media are every image/video/file part of the conversation's user
messages, in order, each distinct URL (or `uuid`) once, so a follow-up turn that repeats the
history reaches the same content-keyed caches. A `file` part is a PDF whose pages are images.
`mm_processor_kwargs` (typed by the schema) is passed on as the keys set: the engine maps them
onto the pipeline's stages (`mm_params`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from ..decoding import SamplingParams
from ..errors import did_you_mean
from .errors import APIError
from .schema import (
    ChatCompletionRequest,
    FilePart,
    FileRef,
    ImageEmbedsData,
    ImageEmbedsPart,
    ImagePart,
    ImageURL,
    Message,
    MMProcessorKwargs,
    ResponseFormat,
    StreamOptions,
    TextPart,
    VideoPart,
    VideoURL,
)

__all__ = [
    "ChatRequest",
    "MediaRef",
    "parse_chat_request",
    "json_number",
    "UNHONOURED",
    "SAMPLING_FIELDS",
]


@dataclass(frozen=True)
class MediaRef:
    # a file is a PDF (its pages are images); image_embeds an image's embeddings
    kind: Literal["image", "video", "file", "image_embeds"]
    # a file's `file_data`, the embeddings' fields as JSON; None: the media kept under `uuid`
    url: str | None
    param: str  # where it sits in the request, e.g. "messages[0].content[1]"
    filename: str | None = None
    uuid: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        """What makes two parts the same media: the uuid when there is one, else the URL."""
        return ("uuid", self.uuid) if self.uuid is not None else (self.kind, self.url or "")


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
    mm_processor_kwargs: dict[str, Any] = field(default_factory=dict)  # the keys set
    sampling: SamplingParams | None = None  # None: the request set no sampling field
    sampling_fields: tuple[str, ...] = ()  # the sampling fields it set, in its order

    @property
    def n(self) -> int:
        return self.sampling.n if self.sampling is not None else 1

    @property
    def logprobs(self) -> bool:
        return self.sampling is not None and self.sampling.logprobs


def json_number(text: str) -> float | int:
    """A JSON number with a fraction or exponent (`json.loads(parse_float=...)`): an int when its
    value is whole, as JSON Schema counts `2.0` an integer; else a float (NaN, inf included, for
    the models to refuse)."""
    value = float(text)
    return int(value) if value.is_integer() else value


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


# -- validation errors -> one 400 ----------------------------------------------------------------
_OURS = {"invalid_text"}  # error types raised by the models' own validators: their code
_FIELDS_OF: dict[str, type[BaseModel]] = {  # the object a key holds, for "unknown field" hints
    "messages": Message,
    "image_url": ImageURL,
    "video_url": VideoURL,
    "stream_options": StreamOptions,
    "response_format": ResponseFormat,
    "file": FileRef,
    "mm_processor_kwargs": MMProcessorKwargs,
    "image_embeds": ImageEmbedsData,
}
_PARTS: dict[str, type[BaseModel]] = {
    "text": TextPart,
    "image_url": ImagePart,
    "video_url": VideoPart,
    "file": FilePart,
    "image_embeds": ImageEmbedsPart,
}


_PLAIN = [
    (
        re.compile(r"a valid dictionary( or (instance of \w+|object to extract fields from))?"),
        "an object",
    ),
    (re.compile(r"a valid (string|list|number)"), r"a \1"),
    (re.compile("a valid integer"), "an integer"),
    (re.compile("a valid boolean"), "true or false"),
]


def _plain(msg: str) -> str:
    """pydantic's message in the words an API client reads ("expected an object")."""
    msg = msg.replace("Input should be ", "")
    for pattern, words in _PLAIN:
        msg = pattern.sub(words, msg)
    return msg[0].lower() + msg[1:]


def _walk(body: Any, loc: tuple, kind: str) -> tuple[str, str, int, Any, Any, Any]:
    """(param, its parent's param, depth, the offending value, its parent, its key) for an error
    at `loc`. The location steps through the body's own keys and indexes; pydantic's union-branch
    names (`str`, `list[...]`, a part's `type` tag) are skipped: the client never wrote them."""
    cur, parent, param, parent_param, depth, prev, key_of = body, None, "", "", 0, None, None
    for i, key in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(key, int) and isinstance(cur, list) and 0 <= key < len(cur):
            step, nxt = f"[{key}]", cur[key]
        elif (
            isinstance(key, str)
            and isinstance(cur, dict)
            and key in cur
            and not (isinstance(prev, int) and cur.get("type") == key and not last)
        ):
            step, nxt = (f".{_name(key)}" if param else _name(key)), cur[key]
        elif last and kind == "missing" and isinstance(cur, dict):
            step, nxt = (f".{_name(key)}" if param else _name(key)), None
        else:
            prev = key
            continue  # a union branch's name
        parent_param, param = param, param + step
        parent, cur, key_of, depth, prev = cur, nxt, key, depth + 1, key
    return param, parent_param, depth, cur, parent, key_of


def _allowed(parent_param: str, parent: Any) -> list[str]:
    last = parent_param.rsplit(".", 1)[-1].split("[")[0] if parent_param else ""
    model: type[BaseModel] | None
    if parent_param.endswith("]") and last == "content" and isinstance(parent, dict):
        kind = parent.get("type")
        model = _PARTS.get(kind) if isinstance(kind, str) else None
    elif parent_param:
        model = _FIELDS_OF.get(last)
    else:
        model = ChatCompletionRequest
    return sorted(model.model_fields) if model is not None else []


def _message(
    err: ErrorDetails, param: str, parent_param: str, value: Any, parent: Any, key: Any
) -> APIError:
    kind = err["type"]
    if kind == "extra_forbidden":
        name, hint = _short(key, 40), did_you_mean(str(key), _allowed(parent_param, parent))
        if not parent_param:
            return _bad(f"unrecognized request argument {name}{hint}", param, "unknown_parameter")
        return _bad(f"{parent_param}: unknown field {name}{hint}", param)
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        tags = err.get("ctx", {}).get(
            "expected_tags", "'text', 'image_url', 'video_url', 'file', 'image_embeds'"
        )
        got = (
            f"unsupported part type {_short(value.get('type'), 40)}"
            if isinstance(value, dict) and "type" in value
            else "each part needs a 'type'"
        )
        return _bad(f"{param}.type: {got}; expected one of {tags}", f"{param}.type")
    if kind == "missing" and param == "model":
        return _bad("'model' is required: one of the ids GET /v1/models lists", "model")
    if kind == "missing":
        return _bad(f"{param}: required field missing", param)
    code = kind if kind in _OURS else "invalid_request"
    msg = err["msg"] if kind in _OURS else "expected " + _plain(err["msg"])
    return _bad(f"{param}: {msg}, got {_short(value)}", param, code)


def _error(body: Any, e: ValidationError) -> APIError:
    """The one error to report: the first field in body order that is wrong, at the deepest place
    the client can fix; where union branches tie, our own errors first, else all their
    expectations in one message ("a valid string or a valid list")."""
    if not isinstance(body, dict):
        return _bad("the request body must be a JSON object", code="invalid_json")
    order = {k: i for i, k in enumerate(body)}
    errs = [err for err in e.errors() if err["loc"]]
    if not errs:
        return _bad(
            f"the request body is not a valid chat completion request: {e.errors()[0]['msg']}"
        )
    first = min(order.get(err["loc"][0], len(order)) for err in errs)
    walked = [
        (err, *_walk(body, err["loc"], err["type"]))
        for err in errs
        if order.get(err["loc"][0], len(order)) == first
    ]
    deepest = max(w[3] for w in walked)
    tied = [w for w in walked if w[3] == deepest]
    ours = [w for w in tied if w[0]["type"] in _OURS]
    err, param, parent_param, _, value, parent, key = (ours or tied)[0]
    if not ours and len({w[0]["msg"] for w in tied}) > 1 and len({w[1] for w in tied}) == 1:
        wanted = " or ".join(dict.fromkeys(_plain(w[0]["msg"]) for w in tied))
        return _bad(f"{param}: expected {wanted}, got {_short(value)}", param)
    return _message(err, param, parent_param, value, parent, key)


# -- what the pipelines cannot honour yet ------------------------------------------------------
# The values that change nothing (the request is served), and why any other value is refused.
UNHONOURED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "logit_bias": (lambda v: v == {}, "logit_bias is not supported"),
    "tools": (lambda v: v == [], "tool calling is not supported"),
    "tool_choice": (lambda v: v in ("none", "auto"), "tool calling is not supported"),
    "media_io_kwargs": (
        lambda v: v == {},
        "frame sampling and image sizes are set by the "
        "pipeline (its video_frames / thumbnails params), not per request",
    ),
    "chat_template_kwargs": (lambda v: v == {}, "the pipeline builds the prompt"),
}


# Request fields -> `SamplingParams` fields (same names).
SAMPLING_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "n",
    "stop",
    "stop_token_ids",
    "logprobs",
    "top_logprobs",
)


def _sampling(
    req: ChatCompletionRequest, body: dict[str, Any]
) -> tuple[SamplingParams | None, tuple[str, ...]]:
    """The request's decoding settings from the sampling fields it set (null means unset; an
    empty stop string stops nothing)."""
    given = {
        k: getattr(req, k) for k in body if k in SAMPLING_FIELDS and getattr(req, k) is not None
    }
    fmt = req.response_format
    if fmt is not None and fmt.type != "text":
        schema = fmt.json_schema.schema_ if fmt.json_schema is not None else None
        if fmt.type == "json_schema" and schema is None:
            raise _bad(
                "response_format.json_schema.schema: a json_schema response format needs "
                "its schema",
                "response_format.json_schema.schema",
                code="missing_schema",
            )
        if schema is not None:
            _check_schema(schema)
        given["response_format"] = {
            "type": fmt.type,
            **({"schema": schema} if fmt.type == "json_schema" else {}),
        }
    if "stop" in given:
        stops = [given["stop"]] if isinstance(given["stop"], str) else given["stop"]
        given["stop"] = [s for s in stops if s]
    if not given:
        return None, ()
    try:
        return SamplingParams.model_validate(given), tuple(given)
    except ValidationError as e:
        err = e.errors()[0]
        msg = _plain(err["msg"].removeprefix("Value error, "))
        if err["loc"]:
            raise _bad(f"{err['loc'][0]}: {msg}", str(err["loc"][0])) from None
        # A rule between fields (top_logprobs needs logprobs), which the schema does not state.
        param = "top_logprobs" if "top_logprobs" in given else next(iter(given))
        raise _bad(f"{param}: {msg}", param, code="invalid_combination") from None


def _check_schema(schema: dict[str, Any]) -> None:
    """A response format's schema must be a JSON Schema (checked against its metaschema)."""
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as e:
        param = "response_format.json_schema.schema"
        raise _bad(
            f"{param}: not a valid JSON Schema: {_short(e.message, 160)[1:-1]}",
            param,
            code="invalid_schema",
        ) from None


def _check_honoured(req: ChatCompletionRequest, body: dict[str, Any]) -> None:
    for key in body:  # in the client's order: the first field that cannot be honoured
        value = getattr(req, key, None)
        if key in UNHONOURED and value is not None:
            fine, why = UNHONOURED[key]
            if not fine(value):
                raise _bad(
                    f"'{key}' = {_short(body[key])} cannot be honoured: {why}",
                    key,
                    code="unsupported_parameter",
                )


# -- the conversation ----------------------------------------------------------------------------
def _parts(msg: Message, param: str) -> tuple[list[str], list[MediaRef]]:
    if msg.content is None:
        return [], []
    if isinstance(msg.content, str):
        return [msg.content], []
    texts, media = [], []
    for j, part in enumerate(msg.content):
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, ImagePart):
            media.append(
                _media(
                    "image",
                    part.image_url.url if part.image_url else None,
                    part.uuid,
                    f"{param}.content[{j}]",
                    "image_url",
                )
            )
        elif isinstance(part, VideoPart):
            media.append(
                _media(
                    "video",
                    part.video_url.url if part.video_url else None,
                    part.uuid,
                    f"{param}.content[{j}]",
                    "video_url",
                )
            )
        elif isinstance(part, ImageEmbedsPart):
            fields = (
                json.dumps(part.image_embeds.model_dump(), sort_keys=True)
                if part.image_embeds
                else None
            )
            media.append(
                _media("image_embeds", fields, part.uuid, f"{param}.content[{j}]", "image_embeds")
            )
        else:
            media.append(_file(part, f"{param}.content[{j}]"))
    return texts, media


def _media(
    kind: Literal["image", "video", "image_embeds"],
    url: str | None,
    uuid: str | None,
    param: str,
    field: str,
) -> MediaRef:
    if url is None and uuid is None:
        raise _bad(
            f"{param}: {field} is null and there is no uuid; send the media (or the uuid "
            "of media sent earlier)",
            f"{param}.{field}",
            code="missing_media",
        )
    return MediaRef(kind, url, param, uuid=uuid)


def _file(part: FilePart, param: str) -> MediaRef:
    ref = part.file or FileRef()
    if ref.file_id is not None:
        raise _bad(
            f"{param}.file.file_id: this server has no Files API to look ids up in; send "
            "the PDF itself as file_data ('data:application/pdf;base64,...')",
            f"{param}.file.file_id",
            code="unsupported_parameter",
        )
    if ref.file_data is None and part.uuid is None:
        raise _bad(
            f"{param}.file: file_data is required (the PDF, 'data:application/pdf;"
            "base64,...'), or a uuid of a file sent earlier",
            f"{param}.file.file_data",
            code="missing_media",
        )
    return MediaRef("file", ref.file_data, param, ref.filename, part.uuid)


def parse_chat_request(body: Any) -> ChatRequest:
    """Check a decoded JSON body; raises `APIError(400)` naming the offending field."""
    try:
        req = ChatCompletionRequest.model_validate(body)
    except ValidationError as e:
        raise _error(body, e) from None
    _check_honoured(req, body)
    sampling, sampling_fields = _sampling(req, body)
    media: list[MediaRef] = []
    seen: dict[tuple[str, str], int] = {}  # media key -> its index in `media`
    said: list[tuple[str, str, str]] = []  # (role, text, param) of user and assistant messages
    for i, msg in enumerate(req.messages):
        param = f"messages[{i}]"
        texts, parts = _parts(msg, param)
        if msg.role not in ("user", "assistant"):
            continue
        said.append((msg.role, " ".join(t.strip() for t in texts if t.strip()), param))
        if msg.role == "user":
            for m in parts:
                if m.key not in seen:
                    seen[m.key] = len(media)
                    media.append(m)
                elif m.url is not None and media[seen[m.key]].url is None:
                    media[seen[m.key]] = m  # the uuid's bytes came in a later part
    if not any(role == "user" for role, _, _ in said):
        raise _bad(
            "no user message: the question comes from the last user message",
            "messages",
            code="invalid_conversation",
        )
    history, question = _conversation(said)
    opts = req.stream_options
    return ChatRequest(
        req.model,
        question,
        media,
        bool(req.stream),
        bool(opts and opts.include_usage),
        req.max_completion_tokens or req.max_tokens,
        sum(role == "user" for role, _, _ in said),
        history,
        req.mm_processor_kwargs.model_dump(exclude_none=True) if req.mm_processor_kwargs else {},
        sampling,
        sampling_fields,
    )


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
        raise _bad(
            f"{groups[0][2]}: an assistant message must answer an earlier user message",
            groups[0][2],
            code="invalid_conversation",
        )
    if groups[-1][0] == "assistant":
        raise _bad(
            f"{groups[-1][2]}: the conversation must end with the user's question; "
            "continuing an assistant message is not supported",
            groups[-1][2],
            code="invalid_conversation",
        )
    joined = [("\n".join(t for t in texts if t), param) for _, texts, param in groups]
    for text, param in joined[:-1:2]:
        if not text:
            raise _bad(
                f"{param}: this earlier user turn has no text; each question goes into "
                "the prompt as text",
                param,
                code="no_question",
            )
    if not joined[-1][0]:
        raise _bad("no question: the last user message has no text", "messages", code="no_question")
    history = [(joined[k][0], joined[k + 1][0]) for k in range(0, len(joined) - 1, 2)]
    return history, joined[-1][0]
