"""A VLM backend from outside the package, in one file: `recorded` answers from a JSON file of
answers recorded earlier ({question: answer}), to replay an evaluation without running a model.

Three parts: its options (a `ModelSpec` subclass: what a `models:` entry with `backend: recorded`
may say, validated with YAML paths), the backend (the `cascade.vlm.backend.Backend` protocol)
and its loader; `register_backend` makes `VLM.load(..., backend="recorded")` and the YAML reach it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from cascade.bill import Bill
from cascade.errors import CascadeError, InputError
from cascade.vlm.decode import GREEDY, OnToken, SamplingParams, TokenEvent
from cascade.vlm.media import as_images
from cascade.vlm.options import ModelSpec, register_backend
from cascade.vlm.reduction import ReductionConfig
from cascade.vlm.result import VLMResult


class RecordedSpec(ModelSpec):
    """A `models:` entry replaying recorded answers: `id` names the recording."""

    backend: Literal["recorded"] = "recorded"
    answers: str = Field(description="JSON file of recorded answers, {question: answer}")
    fallback: str = Field(
        "(no recorded answer)",
        min_length=1,
        description="the answer to a question the file does not have",
    )


class RecordedBackend:
    """Answers each question with its recorded answer, one word per token."""

    name = "recorded"
    family = None  # nothing local prices images: the bill has no visual tokens or FLOPs
    kv_cache = None
    vision_tower_calls = 0
    vision_images_encoded = 0

    def __init__(self, model_id: str, answers: dict[str, str], fallback: str):
        self.model_id, self.answers, self.fallback = model_id, answers, fallback

    def generate(
        self,
        images: Any,
        question: str,
        *,
        max_new_tokens: int = 64,
        reduction: ReductionConfig | None = None,
        system_prompt: str | None = None,
        history: Any = (),
        sampling: SamplingParams = GREEDY,
        on_token: OnToken | None = None,
    ) -> VLMResult:
        t0 = time.perf_counter()
        if not as_images(images):
            raise InputError("no image given: this VLM call needs at least one image")
        words = self.answers.get(question, self.fallback).split()
        kept = words[:max_new_tokens]
        for i, word in enumerate(kept):
            if on_token is not None:
                on_token(TokenEvent(0, i, -1, word if i == 0 else " " + word, 0.0))
        elapsed = time.perf_counter() - t0
        bill = Bill(
            model=self.model_id,
            generated_tokens=len(kept),
            ttft_s=elapsed,
            total_s=elapsed,
            finish_reason="length" if len(kept) < len(words) else "stop",
        )
        return VLMResult(" ".join(kept), (), self.model_id, self.name, bill)

    def generate_batch(
        self,
        requests: Any,
        *,
        max_new_tokens: int = 64,
        reduction: ReductionConfig | None = None,
        system_prompt: str | None = None,
        sampling: SamplingParams = GREEDY,
    ) -> list[VLMResult]:
        return [self.generate(images, q, max_new_tokens=max_new_tokens) for images, q in requests]

    def session(self, images: Any, **_: Any) -> Any:
        raise CascadeError("the recorded backend has no sessions")


def load(
    model: str,
    *,
    answers: str,
    fallback: str = "(no recorded answer)",
    device: str = "auto",
    dtype: Any = "auto",
    limits: Any = None,
) -> RecordedBackend:
    """`VLM.load(model, backend="recorded", answers=...)`; device, dtype and image limits do not
    apply to a recording."""
    try:
        recorded = json.loads(Path(answers).read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"recorded backend: cannot read answers file '{answers}': {e}") from e
    if not isinstance(recorded, dict) or not all(isinstance(v, str) for v in recorded.values()):
        raise InputError(f"recorded backend: '{answers}' must hold a JSON object of strings")
    return RecordedBackend(model, recorded, fallback)


register_backend("recorded", load, RecordedSpec)
