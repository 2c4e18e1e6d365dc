"""What a caller asks of the VLM's decoding (`SamplingParams`) and what each answer carries back
(`Completion`: text, finish reason, per-token `TokenLogprob`s).

Weightless and torch-free, so the task API, the stage library, the server and YAML all validate
and pass the same object; the runtime (`cascade.vlm.decode`, `cascade.vlm.logits`) turns it into
logits processors and a per-sequence random generator. The fields and their ranges are vLLM's
(`SamplingParams`) with OpenAI's bounds where OpenAI has one, so a chat-completions request maps
onto it field by field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import InputError

__all__ = [
    "SamplingParams",
    "GREEDY",
    "TokenLogprob",
    "Completion",
    "sampling_params",
    "MAX_N",
    "DEFAULT_MAX_NUM_SEQS",
    "MAX_TOP_LOGPROBS",
    "MAX_STOP",
    "ResponseFormat",
    "tool_answer_json",
]

MAX_N = 16  # completions per request: each is a decode of its own
DEFAULT_MAX_NUM_SEQS = 32  # continuous batching: rows one decode step runs (vLLM's max_num_seqs)
MAX_TOP_LOGPROBS = 20  # OpenAI's bound
MAX_STOP = 4  # OpenAI's bound on stop strings


class ResponseFormat(BaseModel):
    """The answer's shape, enforced while decoding (`cascade.vlm.structured`): `json_object` any
    JSON object, `json_schema` an instance of `schema` (a JSON Schema object)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    type: Literal["json_object", "json_schema"]
    schema_: dict[str, Any] | None = Field(
        None, alias="schema", description="the JSON Schema (json_schema only)"
    )

    @model_validator(mode="after")
    def _schema_when_asked(self) -> ResponseFormat:
        if self.type == "json_schema" and self.schema_ is None:
            raise ValueError("a json_schema response format needs its schema")
        if self.type == "json_object" and self.schema_ is not None:
            raise ValueError("a json_object response format takes no schema (use json_schema)")
        if self.schema_ is not None:
            import jsonschema

            try:
                jsonschema.validators.validator_for(self.schema_).check_schema(self.schema_)
            except jsonschema.SchemaError as e:
                raise ValueError(f"not a valid JSON Schema: {e.message[:160]}") from None
        return self

    @property  # shadows pydantic's deprecated v1 classmethod `schema` on purpose
    def schema(self) -> dict[str, Any]:  # type: ignore[override]
        """The schema the output must match (`{"type": "object"}` for json_object)."""
        return self.schema_ if self.schema_ is not None else {"type": "object"}


class SamplingParams(BaseModel):
    """How the answer's tokens are chosen, and what comes back with them.

    temperature 0 (the default) is greedy: the argmax of the raw logits, exactly as without any
    settings (after the penalties and a response-format constraint, when those are set). Else the
    logits go through the chain repetition / presence / frequency penalty -> temperature -> top_k
    -> top_p -> min_p and a token is drawn from what is left.

    seed: the draw of completion i (of `n`) uses its own generator seeded with `seed + i` (vLLM's
    convention), so completion 0 equals the n=1 answer with that seed; without a seed each
    completion draws from a fresh, unseeded generator. stop: strings that end the answer
    (finish_reason "stop", the string itself not returned); stop_token_ids: token ids that do the
    same. logprobs: return each token's log-probability under the model (the raw fp32
    log-softmax, whatever the sampling settings) and top_logprobs alternatives per token.
    max_tokens: most tokens per completion (None: the caller's own limit, e.g. a stage's
    max_new_tokens). response_format: constrain the output to JSON (an object, or an instance of
    a schema) by a grammar over the tokenizer's tokens, applied first in the processor chain.

    Built directly, a wrong value raises pydantic's ValidationError naming the field; built by
    `sampling_params` (what the task API, pipeline inputs and the runtime use), an InputError
    (`sampling.top_p: input should be greater than 0, got 0`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    temperature: float = Field(0.0, ge=0, le=100, description="0: greedy")
    top_p: float = Field(
        1.0,
        gt=0,
        le=1,
        description="nucleus: keep the most likely tokens whose probability reaches top_p",
    )
    top_k: int = Field(0, ge=-1, description="keep the k most likely tokens (0 or -1: all)")
    min_p: float = Field(
        0.0, ge=0, le=1, description="drop tokens below min_p x the top token's probability"
    )
    seed: int | None = Field(
        None,
        ge=-(2**63),
        le=2**64 - 1,
        description="same seed, same tokens (completion i uses seed + i)",
    )
    repetition_penalty: float = Field(
        1.0,
        gt=0,
        le=100,
        description="divide a seen token's positive logit (multiply a negative one) by this",
    )
    presence_penalty: float = Field(
        0.0, ge=-2, le=2, description="subtract from a seen token's logit once"
    )
    frequency_penalty: float = Field(
        0.0, ge=-2, le=2, description="subtract per occurrence of a token so far"
    )
    n: int = Field(1, ge=1, le=MAX_N, description="completions sharing one prefill")
    stop: tuple[str, ...] = Field(
        (), max_length=MAX_STOP, description="strings that end the answer (not returned)"
    )
    stop_token_ids: tuple[int, ...] = Field((), description="token ids that end the answer")
    logprobs: bool = Field(False, description="return each token's log-probability")
    top_logprobs: int = Field(
        0, ge=0, le=MAX_TOP_LOGPROBS, description="and that many most likely alternatives"
    )
    max_tokens: int | None = Field(None, ge=1, description="most tokens per completion")
    response_format: ResponseFormat | None = Field(
        None, description="JSON output, enforced while decoding"
    )

    @field_validator("stop", mode="before")
    @classmethod
    def _one_string(cls, v: Any) -> Any:
        return (v,) if isinstance(v, str) else v

    @field_validator("stop")
    @classmethod
    def _no_empty(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if any(not s for s in v):
            raise ValueError("a stop string must not be empty")
        return tuple(dict.fromkeys(v))

    @field_validator("stop_token_ids")
    @classmethod
    def _ids(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if any(t < 0 for t in v):
            raise ValueError("token ids are >= 0")
        return v

    @model_validator(mode="after")
    def _top_needs_logprobs(self) -> SamplingParams:
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs needs logprobs=true")
        return self

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def penalized(self) -> bool:
        return (
            self.repetition_penalty != 1
            or self.presence_penalty != 0
            or self.frequency_penalty != 0
        )

    def for_completion(self, i: int) -> SamplingParams:
        """The settings of completion i of n: one completion, its own seed (seed + i)."""
        seed = None if self.seed is None else self.seed + i
        return self.model_copy(update={"n": 1, "seed": seed})


GREEDY = SamplingParams()


def sampling_params(value: Any, where: str = "sampling") -> SamplingParams:
    """A `SamplingParams` from itself, a mapping of its fields, or None (greedy); InputError
    naming the field (`sampling.temperature: ...`) otherwise."""
    if value is None:
        return GREEDY
    if isinstance(value, SamplingParams):
        return value
    if not isinstance(value, dict):
        raise InputError(
            f"{where}: expected SamplingParams or a mapping of its fields, got "
            f"{type(value).__name__}"
        )
    try:
        return SamplingParams.model_validate(value)
    except ValidationError as e:
        raise InputError(_described(e, where)) from None


def _described(e: ValidationError, where: str) -> str:
    """The first error as `sampling.top_p: input should be greater than 0, got 0`."""
    err = e.errors()[0]
    field = ".".join(str(p) for p in err["loc"])
    at = f"{where}.{field}" if field else where
    msg = err["msg"].removeprefix("Value error, ")
    got = "" if err["type"] == "value_error" and not field else f", got {err.get('input')!r:.60}"
    return f"{at}: {msg[0].lower() + msg[1:]}{got}"


@dataclass(frozen=True)
class TokenLogprob:
    """One token in OpenAI's logprobs shape: its text, log p under the model, its UTF-8 bytes
    (a token may hold part of a character) and, when asked, the most likely alternatives."""

    token: str
    logprob: float
    bytes: tuple[int, ...]
    top: tuple[TokenLogprob, ...] = ()

    def to_openai(self, with_top: bool = True) -> dict[str, Any]:
        """OpenAI's logprobs entry; `with_top`: with `top_logprobs`."""
        d: dict[str, Any] = {
            "token": self.token,
            "logprob": self.logprob,
            "bytes": list(self.bytes),
        }
        if with_top:
            d["top_logprobs"] = [t.to_openai(False) for t in self.top]
        return d


@dataclass(frozen=True)
class Completion:
    """One of a request's `n` answers: its text (stop string removed), why it ended, its token
    ids and, when asked, its tokens' log-probabilities."""

    text: str
    finish_reason: Literal["stop", "length"] = "stop"
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[TokenLogprob, ...] | None = None


_SLOTS = ("answer", "text", "value", "result", "content", "output")


def tool_answer_json(text: str, fmt: ResponseFormat) -> str:
    """A tool's answer (OCR read the total; no VLM decode) as JSON in the response format: for a
    schema, the text fills the property meant for it (named answer / text / value / result /
    content / output, else the first required one whose type can hold it; a number is parsed
    from the text for a numeric slot), every other required property gets its schema's default,
    const, first enum member or an empty value of its type; the result is checked against the
    schema with `jsonschema`. json_object: `{"answer": text}`. InputError when the schema has no
    place the text fits."""
    import json

    import jsonschema

    if fmt.type == "json_object":
        return json.dumps({"answer": text})
    value = _fill(fmt.schema, text)
    try:
        jsonschema.validate(value, fmt.schema)
    except (jsonschema.ValidationError, jsonschema.SchemaError) as e:
        raise InputError(
            f"response_format.json_schema.schema: a tool answered {text!r:.60} "
            f"(no VLM decode), and this schema has no place it fits: "
            f"{e.message[:160]}"
        ) from None
    return json.dumps(value)


def _types(schema: dict[str, Any]) -> list[str]:
    t = schema.get("type", "string")
    return t if isinstance(t, list) else [t]


def _fill(schema: dict[str, Any], text: str) -> Any:
    """`schema` with `text` in its one slot."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return next(
            (v for v in schema["enum"] if str(v).lower() == text.strip().lower()), schema["enum"][0]
        )
    kinds = _types(schema)
    if "object" in kinds or "properties" in schema:
        props: dict[str, Any] = schema.get("properties", {})
        required = list(schema.get("required", []))
        slot = next((p for p in _SLOTS if p in props), None) or next(
            (
                p
                for p in required + list(props)
                if isinstance(props.get(p), dict)
                and set(_types(props[p])) & {"string", "number", "integer"}
            ),
            None,
        )
        order = [*props, *(p for p in required if p not in props)]  # the schema's order
        return {
            p: _fill(props[p], text) if p == slot else _empty(props.get(p, {}))
            for p in order
            if p == slot or p in required
        }
    if "array" in kinds:
        return [_fill(schema.get("items", {}), text)]
    if "string" in kinds:
        return text
    if "integer" in kinds or "number" in kinds:
        import re

        found = re.search(r"-?\d+(?:\.\d+)?", text.replace(",", ""))
        number = float(found.group()) if found else 0.0
        return int(number) if "integer" in kinds or number.is_integer() else number
    if "boolean" in kinds:
        return text.strip().lower() in ("yes", "true", "1")
    return None


def _empty(schema: dict[str, Any]) -> Any:
    """A required property the tool's text does not fill: its default, else an empty value."""
    if "default" in schema:
        return schema["default"]
    if "const" in schema or "enum" in schema:
        return _fill(schema, "")
    kinds = _types(schema)
    if "object" in kinds or "properties" in schema:
        return {
            p: _empty(schema.get("properties", {}).get(p, {})) for p in schema.get("required", [])
        }
    if "array" in kinds:
        return []
    if "string" in kinds:
        return ""
    if "integer" in kinds or "number" in kinds:
        return schema.get("minimum", 0)
    if "boolean" in kinds:
        return False
    return None
