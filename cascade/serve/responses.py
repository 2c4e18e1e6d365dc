"""What the server answers, as pydantic models: the bodies it builds and the schema `/openapi.json`
publishes for them (chat completions, stream chunks, models, health, the error envelope).

OpenAI's shapes, plus one extension: a top-level `cascade` field on a completion (and on the last
chunk of a stream) with who answered, the evidence, the bill against the full-resolution
baseline, the trace and its warnings. Clients that do not know it ignore it (the `openai` package
keeps it in `model_extra`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = [
    "ChatCompletion",
    "ChatCompletionChunk",
    "Choice",
    "ChunkChoice",
    "Delta",
    "Usage",
    "Bill",
    "CascadeExtra",
    "ModelCard",
    "ModelList",
    "ErrorBody",
    "ErrorResponse",
    "Health",
    "Liveness",
    "STREAM_SCHEMA",
    "STATUS",
]


class PromptTokensDetails(BaseModel):
    cached_tokens: int = Field(description="prompt tokens whose KV came from the prefix cache")


class Usage(BaseModel):
    """OpenAI usage: prompt = visual + text tokens the VLM prefilled (0 for a tool answer)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails


class Bill(BaseModel):
    """What this answer cost, each figure with its full-resolution baseline when known."""

    produced_by: Literal["vlm", "tool"]
    visual_tokens: int
    baseline_visual_tokens: int | None
    visual_tokens_saved: int | None
    text_tokens: int
    completion_tokens: int
    vision_flops: float
    prefill_flops: float
    decode_flops: float
    baseline_vision_flops: float | None
    baseline_prefill_flops: float | None
    seconds: float
    vlm_seconds: float = Field(description="the VLM's time to first token (0 for a tool answer)")
    kv_cache: str = Field(description="the KV prefix cache outcome: hit, partial, miss or off")
    images_encoded: int = Field(0, description="images the vision tower ran on for this answer")
    images_cached: int = Field(0, description="images whose tower output the encoder cache served")
    kv_bytes: int = Field(
        0, description="KV bytes the answer was decoded against, after any KV press (docs/kv.md)"
    )
    kv_bytes_unpressed: int = Field(0, description="the same KV had no press dropped a token")
    visual_token_savings: float | None = Field(None, description="baseline / used visual tokens")
    prefill_savings: float | None = Field(None, description="baseline / used prefill FLOPs")
    baseline_seconds_estimate: float | None = Field(
        None, description="an estimate: this answer's time with its VLM time scaled by FLOPs"
    )


class CascadeExtra(BaseModel):
    produced_by: Literal["vlm", "tool"]
    evidence: dict[str, Any] = Field(
        description="images the VLM saw, OCR lines, detections, routes and retrieval scores"
    )
    bill: Bill
    warnings: list[str] = Field(
        description="e.g. a truncated video answered from the part that decodes"
    )
    trace: dict[str, Any] | None = Field(description="stages, their seconds and counters")


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None = Field(
        description="the token's UTF-8 bytes (a token may hold part of a character)"
    )


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob] = Field(
        description="the `top_logprobs` most likely tokens at this position"
    )


class ChoiceLogprobs(BaseModel):
    content: list[TokenLogprob] | None = Field(
        description="one entry per generated token (log p "
        "under the model, raw logits); null for a tool "
        "answer, which sampled no token"
    )


class AssistantMessage(BaseModel):
    role: Literal["assistant"]
    content: str


class Choice(BaseModel):
    index: int
    message: AssistantMessage
    logprobs: ChoiceLogprobs | None = None
    finish_reason: Literal["stop", "length"]


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    cascade: CascadeExtra


class Delta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    index: int
    delta: Delta
    logprobs: ChoiceLogprobs | None = None
    finish_reason: Literal["stop", "length"] | None


class ChatCompletionChunk(BaseModel):
    """One server-sent event of a stream: per choice (`index`; n of them) one with `delta.role`,
    then one per token (`delta.content`, and its `logprobs` when asked), then one with
    `finish_reason`; the last of those carries `cascade`; with `stream_options.include_usage` a
    chunk with no choices and `usage` follows."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = None
    cascade: CascadeExtra | None = None


class ModelCard(BaseModel):
    id: str = Field(description="`cascade/<pipeline>`")
    object: Literal["model"]
    created: int
    owned_by: str
    root: str = Field(description="the shipped pipeline's name or the YAML it was loaded from")
    description: str
    media: list[str] = Field(description="the media inputs it takes: video, images, image, path")


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[ModelCard]


class ErrorBody(BaseModel):
    message: str = Field(description="what to change; names request fields, never server paths")
    type: str
    param: str | None = Field(
        description="the request field at fault, e.g. `messages[0].content[1].image_url.url`"
    )
    code: str | None


class ErrorResponse(BaseModel):
    """Every refusal and failure, as OpenAI sends them."""

    error: ErrorBody


class Health(BaseModel):
    """Readiness: 200 once every served pipeline can answer, 503 while something is starting."""

    status: Literal["ok", "starting", "failed"]
    waiting_for: list[str] = Field(
        description="what is not ready yet (models loading, "
        "deployments without a running replica), in words"
    )
    models: dict[str, str] = Field(description="served model id -> loading, ready or failed: <why>")
    busy: int
    queued: int
    max_concurrent: int
    max_queue: int
    random_weights: bool
    replicas: dict[str, int] | None = Field(
        None, description="Ray Serve: running replicas per deployment"
    )


class Liveness(BaseModel):
    """The process answers HTTP (it may still be loading models: see /health)."""

    status: Literal["alive"]


# One event of a stream (OpenAPI 3.1 has a text/event-stream schema describe one event): its
# `data` is a ChatCompletionChunk, an ErrorResponse (a failure after the first token), or [DONE].
STREAM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["data"],
    "description": "one server-sent event (`data: <payload>`): ChatCompletionChunk payloads as "
    "the answer is generated, an ErrorResponse if the request fails after its first token, then "
    "the payload [DONE]",
    "properties": {
        "data": {
            "anyOf": [
                {"type": "string", "enum": ["[DONE]"]},
                {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": {
                        "anyOf": [
                            {"$ref": "#/components/schemas/ChatCompletionChunk"},
                            {"$ref": "#/components/schemas/ErrorResponse"},
                        ]
                    },
                },
            ]
        }
    },
}

# Every status the chat endpoint answers, with when.
STATUS: dict[int, str] = {
    400: "a client mistake: malformed JSON, a field of the wrong type or range, an unknown field, "
    "a value the pipeline cannot honour, media it cannot use (`code` says which)",
    404: "no such model (`model_not_found`)",
    408: "the request body did not arrive within --upload-timeout (`upload_timeout`)",
    413: "over a size limit: body, upload, pixels per image, total pixels, frames (`code`)",
    415: "the body is not JSON (Content-Type)",
    429: "queue full (--max-queue); retry after `Retry-After` seconds",
    499: "the client went away (recorded in /metrics; no body reaches anyone)",
    500: "a bug or a pipeline failure; the server keeps serving",
    503: "shutting down",
    504: "not finished within --timeout (queue included)",
    507: "no space left for the upload on this server (--upload-dir)",
}
