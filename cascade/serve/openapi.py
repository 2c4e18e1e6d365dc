"""The published contract: every route's request body, responses and status codes in
`/openapi.json`, from the same pydantic models that parse requests and build responses.

Routes declare their responses by reference (`responses_for`); `publish` then puts every model's
JSON schema under `components/schemas` in one pass (so a model used by two responses is one
schema), and narrows the request's `model` to the ids this server serves, so a generated client
or a fuzzer knows them.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic.json_schema import models_json_schema

from .responses import (
    STATUS,
    STREAM_SCHEMA,
    ChatCompletion,
    ChatCompletionChunk,
    ErrorResponse,
    Health,
    Liveness,
    ModelList,
)
from .schema import ChatCompletionRequest

__all__ = ["publish", "responses_for", "ref", "CHAT_BODY"]

_REF = "#/components/schemas/{model}"
_RESPONSES = (ChatCompletion, ChatCompletionChunk, ErrorResponse, Health, Liveness, ModelList)


def ref(model: type | str) -> dict[str, str]:
    return {"$ref": _REF.format(model=model if isinstance(model, str) else model.__name__)}


def json_response(description: str, model: type, **extra: Any) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": ref(model)}},
        **extra,
    }


def responses_for(codes: list[int]) -> dict[int | str, dict[str, Any]]:
    """The error responses of the chat endpoint with these status codes (ErrorResponse bodies)."""
    out: dict[int | str, dict[str, Any]] = {}
    for code in codes:
        extra: dict[str, Any] = {}
        if code == 429:
            extra["headers"] = {
                "Retry-After": {
                    "description": "seconds to wait before retrying",
                    "schema": {"type": "integer"},
                }
            }
        out[code] = json_response(STATUS[code], ErrorResponse, **extra)
    return out


CHAT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": ref(ChatCompletionRequest)}},
    }
}

CHAT_OK: dict[str, Any] = {
    "description": "the answer: a ChatCompletion, or with `stream: true` server-sent events",
    "content": {
        "application/json": {"schema": ref(ChatCompletion)},
        "text/event-stream": {"schema": STREAM_SCHEMA},
    },
}


def _tiny_png() -> str:
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 90)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def chat_examples(models: dict[str, set[str]]) -> dict[str, Any]:
    """Request examples for the docs (and a fuzzer's first cases): an image question to a
    served model that takes images, plain and streamed; a video question otherwise."""
    takes_images = [m for m, kinds in models.items() if kinds & {"images", "image", "path"}]
    if takes_images:
        part = {"type": "image_url", "image_url": {"url": _tiny_png()}}
        model = takes_images[0]
    else:
        part = {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,<the file>"}}
        model = next(iter(models))
    body = {
        "model": model,
        "messages": [
            {"role": "user", "content": [part, {"type": "text", "text": "What is in the picture?"}]}
        ],
        "max_tokens": 8,
    }
    return {
        "image question": {"value": body},
        "streamed, with usage": {
            "value": {**body, "stream": True, "stream_options": {"include_usage": True}}
        },
    }


def publish(app: FastAPI, models: dict[str, set[str]]) -> None:
    """Make `app.openapi()` carry the contract's schemas (built once, on first request).
    `models`: served model id -> the media input types it takes."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()
        body = schema["paths"]["/v1/chat/completions"]["post"]["requestBody"]
        body["content"]["application/json"]["examples"] = chat_examples(models)
        _, top = models_json_schema(
            [(m, "serialization") for m in _RESPONSES] + [(ChatCompletionRequest, "validation")],
            ref_template=_REF,
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(top.get("$defs", {}))
        components["ChatCompletionRequest"]["properties"]["model"]["enum"] = list(models)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
