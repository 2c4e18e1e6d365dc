"""The chat-completions request as pydantic models: the parser of every request and the schema
`/openapi.json` publishes (one definition, so the two cannot disagree).

Shapes and ranges are OpenAI's (`temperature` in [0, 2], `top_logprobs` in [0, 20], at most 4
`stop` sequences ...), plus what vLLM adds and this server accepts: `video_url` content parts,
a `uuid` on each media part, `mm_processor_kwargs` (its keys typed), `top_k`, `min_p`,
`repetition_penalty`, `stop_token_ids`, `media_io_kwargs`, `chat_template_kwargs`; and OpenAI's
`file` parts (PDF documents). Validation is strict (no "yes" for a boolean, no 1.5 for an integer,
no NaN) and closed (an unknown field is an error, as OpenAI answers it).

A field the schema admits may still be refused by what the pipelines can do today:
`protocol.UNHONOURED` lists the values such a field is served at (its no-op values) and any other
value is a 400 naming the field. The sampling fields are honoured (`protocol.SAMPLING_FIELDS`:
they become the request's `cascade.decoding.SamplingParams`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from ..decoding import MAX_N

__all__ = [
    "ChatCompletionRequest",
    "Message",
    "TextPart",
    "ImagePart",
    "VideoPart",
    "FilePart",
    "ImageURL",
    "VideoURL",
    "FileRef",
    "StreamOptions",
    "ResponseFormat",
    "MMProcessorKwargs",
]

_STRICT = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)


def _utf8(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate from a "\ud800" JSON escape
        raise PydanticCustomError(
            "invalid_text",
            "not valid UTF-8 text (lone surrogate at character {at})",
            {"at": e.start},
        ) from None
    return text


Text = Annotated[str, AfterValidator(_utf8)]


class _Strict(BaseModel):
    model_config = _STRICT


class ImageURL(_Strict):
    url: Text = Field(
        min_length=1,
        json_schema_extra={"format": "uri"},
        description="`data:<mime>;base64,<data>`, `file://<path>` under the "
        "server's --media-root, or `http(s)://` from a host the server allows "
        "(--allowed-media-domains; refused otherwise)",
    )
    detail: Literal["auto", "low", "high"] | None = Field(
        None, description="accepted for compatibility; the cascade chooses the resolution itself"
    )


class VideoURL(_Strict):
    """vLLM's video part: a whole video file (MP4, WebM, MKV, MOV ...), decoded with PyAV."""

    url: Text = Field(
        min_length=1,
        json_schema_extra={"format": "uri"},
        description="`data:video/<type>;base64,<data>`, or `file://<path>` under "
        "the server's --media-root",
    )


class FileRef(_Strict):
    """OpenAI's file part: a PDF document, its pages rendered and read like images."""

    file_data: Text | None = Field(
        None,
        min_length=1,
        description="the PDF: `data:application/pdf;base64,<data>` (or the "
        "bare base64), or `file://<path>` under the server's --media-root",
    )
    filename: Text | None = Field(
        None, max_length=255, description="shown in the evidence with each page"
    )
    file_id: str | None = Field(
        None, description="refused: this server has no Files API; send file_data"
    )


class TextPart(_Strict):
    type: Literal["text"]
    text: Text


MediaId = Annotated[
    Text,
    Field(
        min_length=1,
        max_length=256,
        description=(
            "vLLM's media id: the server keeps the media under it (byte-bounded LRU, "
            "--media-cache-mb); a later part may send the uuid with the media null. Unknown uuid: "
            "400, resend the media"
        ),
    ),
]


class ImagePart(_Strict):
    type: Literal["image_url"]
    image_url: ImageURL | None = Field(
        None, description="null (or absent) with a `uuid` the server has seen"
    )
    uuid: MediaId | None = None


class VideoPart(_Strict):
    type: Literal["video_url"]
    video_url: VideoURL | None = Field(
        None, description="null (or absent) with a `uuid` the server has seen"
    )
    uuid: MediaId | None = None


class FilePart(_Strict):
    type: Literal["file"]
    file: FileRef | None = Field(
        None, description="null (or absent) with a `uuid` the server has seen"
    )
    uuid: MediaId | None = None


class ImageEmbedsData(_Strict):
    """One image's visual embeddings computed elsewhere (`cascade embed`), in vLLM's layout."""

    image_embeds: Text = Field(
        min_length=1,
        description="base64 of a torch.save'd tensor [visual tokens, features]: the model's "
        "vision tower output for the image",
    )
    image_grid_thw: Text = Field(
        min_length=1,
        description="base64 of a torch.save'd tensor [1, 3]: the image's patch grid (t, h, w)",
    )


class ImageEmbedsPart(_Strict):
    """An image sent as its embeddings: answered as the image itself would be (checked against
    the served VLM: shape and dtype; 400 otherwise)."""

    type: Literal["image_embeds"]
    image_embeds: ImageEmbedsData | None = Field(
        None, description="null (or absent) with a `uuid` the server has seen"
    )
    uuid: MediaId | None = None


ContentPart = Annotated[
    TextPart | ImagePart | VideoPart | FilePart | ImageEmbedsPart, Field(discriminator="type")
]


class MMProcessorKwargs(_Strict):
    """vLLM's per-request media parameters, as stage params of the served pipeline for this
    request only (`mm_params.MM_KEYS`)."""

    fps: float | None = Field(
        None,
        gt=0,
        le=240,
        description="video frames sampled per second "
        "(the pipeline's video_frames stages, in fps mode)",
    )
    max_frames: int | None = Field(None, ge=1, description="most video frames kept")
    min_pixels: int | None = Field(
        None, ge=1, description="each image the VLM sees is scaled up to at least this many pixels"
    )
    max_pixels: int | None = Field(
        None, ge=1, description="each image the VLM sees is scaled down to at most this many pixels"
    )
    video_pruning_rate: float | None = Field(
        None,
        ge=0,
        lt=1,
        description="share of the frames' visual tokens dropped before the vision tower, those "
        "that repeat the frame before (EVS; the pipeline's vlm_answer stages)",
    )
    route_policy: Literal["cost", "cascade", "full"] | None = Field(
        None,
        description="the path route: cost (the whole media or the cascade, whichever is cheaper "
        "on the server's device), cascade or full (that path)",
    )
    max_visual_tokens: int | None = Field(
        None, ge=1, description="whole media over this many visual tokens is cascaded"
    )


class FunctionCall(_Strict):
    name: str
    arguments: str = Field(description="JSON text of the arguments")


class ToolCall(_Strict):
    id: str
    type: Literal["function"]
    function: FunctionCall


class AudioRef(_Strict):
    id: str


class Message(_Strict):
    """One message. The question is the last user message's text; earlier user/assistant turns
    are its history; the media are every image/video part of the user messages."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Text | list[ContentPart] | None = None
    name: Text | None = None
    # Accepted so that a conversation an OpenAI client recorded can be sent back as it is; the
    # pipelines answer without tools, so these carry nothing the answer uses.
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    function_call: FunctionCall | None = None
    refusal: str | None = None
    reasoning_content: str | None = None
    audio: AudioRef | None = None


class StreamOptions(_Strict):
    include_usage: bool | None = Field(
        None, description="send a last chunk with `usage` (and no choices) before [DONE]"
    )


class JSONSchemaFormat(_Strict):
    name: str = Field(min_length=1, max_length=64)
    description: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Strict):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JSONSchemaFormat | None = None


class FunctionDef(_Strict):
    name: str = Field(min_length=1, max_length=64)
    description: str | None = None
    parameters: dict[str, Any] | None = Field(None, description="a JSON Schema object")
    strict: bool | None = None


class Tool(_Strict):
    type: Literal["function"]
    function: FunctionDef


class ToolChoiceFunction(_Strict):
    name: str


class ToolChoice(_Strict):
    type: Literal["function"]
    function: ToolChoiceFunction


class ChatCompletionRequest(_Strict):
    """POST /v1/chat/completions. `model` is `cascade/<pipeline>` (GET /v1/models lists them)."""

    model: Text = Field(min_length=1, description="a served model id: `cascade/<pipeline>`")
    messages: list[Message] = Field(min_length=1)
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(
        None,
        ge=1,
        description="most answer tokens (a tool answer "
        "is not affected); needs a pipeline with a max_new_tokens input",
    )
    max_completion_tokens: int | None = Field(None, ge=1, description="same as max_tokens")
    n: int | None = Field(
        None,
        ge=1,
        le=MAX_N,
        description="completions: one prefill, n decodes (a tool answer: n identical choices)",
    )
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=-1, description="vLLM")
    min_p: float | None = Field(None, ge=0, le=1, description="vLLM")
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    repetition_penalty: float | None = Field(None, gt=0, le=100, description="vLLM")
    seed: int | None = Field(None, ge=-(2**63), le=2**64 - 1)
    stop: Text | Annotated[list[Text], Field(max_length=4)] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20, description="needs logprobs: true")
    stop_token_ids: list[Annotated[int, Field(ge=0)]] | None = Field(None, description="vLLM")
    logit_bias: dict[str, Annotated[int, Field(ge=-100, le=100)]] | None = None
    response_format: ResponseFormat | None = None
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    user: str | None = None
    metadata: dict[str, str] | None = None
    store: bool | None = None
    service_tier: str | None = None
    media_io_kwargs: dict[str, Any] | None = Field(None, description="vLLM")
    mm_processor_kwargs: MMProcessorKwargs | None = Field(None, description="vLLM")
    chat_template_kwargs: dict[str, Any] | None = Field(None, description="vLLM")
