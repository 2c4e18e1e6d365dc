"""Question answering over videos, image sets and documents, in a few lines.

    from cascade import VideoQA
    qa = VideoQA(model="Qwen/Qwen2-VL-2B-Instruct")
    answer = qa.ask("clip.mp4", "What does the sign say?")
    answer.text, answer.evidence, answer.trace

Each class is a shipped pipeline (or your YAML) with the media input filled from `media`; the
answer carries its evidence and its bill. `qa.session(media)` keeps the media fixed for follow-up
questions: the content-keyed caches (CLIP embeddings, the VLM's KV prefix) make later turns skip the
vision work, and each turn's trace shows the hits.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from .artifacts import Answer
from .errors import InputError, SpecError
from .pipeline import Pipeline

__all__ = ["QA", "VideoQA", "MultiImageQA", "DocQA", "Session"]

# Which pipeline input receives the media, in order of preference.
_MEDIA_INPUTS = ("video", "images", "image", "page")


class QA:
    """Ask questions through a pipeline whose outputs include `answer: Answer`.

    pipeline: shipped pipeline name (`cascade run` names) or a YAML path.
    model: VLM to use (hub id or local dir); sets `model` on every `vlm_answer` stage.
    device: "cpu", "cuda", ...; set on every stage that has a `device` param.
    overrides: more params by dotted path, e.g. {"retrieve.top_k": 4}.
    """

    default_pipeline = "video_qa"

    def __init__(self, pipeline: str | Path | None = None, *, model: str | None = None,
                 device: str | None = None, overrides: dict[str, Any] | None = None):
        source = pipeline or self.default_pipeline
        probe = Pipeline.load(source)  # validate first; no model is loaded here
        extra: dict[str, Any] = {}
        for name, st in probe.stages.items():
            fields = type(st).Params.model_fields
            if model is not None and st.type_name == "vlm_answer":
                extra[f"{name}.model"] = model
            if device is not None and "device" in fields:
                extra[f"{name}.device"] = device
        self.pipeline = Pipeline.load(source, overrides={**extra, **(overrides or {})})
        if "answer" not in self.pipeline.spec.outputs:
            raise SpecError(f"pipeline '{self.pipeline.name}' has no 'answer' output; QA needs one",
                            file=self.pipeline.file)
        media = [n for n in _MEDIA_INPUTS if n in self.pipeline.spec.inputs]
        if not media or "question" not in self.pipeline.spec.inputs:
            raise SpecError(f"pipeline '{self.pipeline.name}' needs a 'question' input and one of "
                            f"{', '.join(_MEDIA_INPUTS)}", file=self.pipeline.file)
        self.media_input = media[0]

    def ask(self, media: Any, question: str, **inputs: Any) -> Answer:
        """Answer `question` about `media` (a video path, image paths/arrays/PIL images, or one image)."""
        if not isinstance(question, str) or not question.strip():
            raise InputError("question must be a non-empty string")
        if self.media_input == "images" and not isinstance(media, (list, tuple)):
            media = [media]
        result = self.pipeline.run(**{self.media_input: media, "question": question, **inputs})
        answer = result["answer"]
        if answer is None:
            raise InputError(f"pipeline '{self.pipeline.name}' produced no answer; see the trace: "
                             + "; ".join(f"{r.name}: {r.status} {r.detail}" for r in result.trace.stages))
        return dataclasses.replace(answer, trace=result.trace)

    def session(self, media: Any) -> "Session":
        """A multi-turn conversation over fixed media."""
        return Session(self, media)

    def setup(self) -> "QA":
        """Load every model now rather than on the first question."""
        self.pipeline.setup()
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}(pipeline={self.pipeline.name!r}, media_input={self.media_input!r})"


class VideoQA(QA):
    """Questions about one video: sample, retrieve relevant frames, read fine only where needed."""

    default_pipeline = "video_qa"


class MultiImageQA(QA):
    """Questions about a set of images (retrieval over images and their tiles)."""

    default_pipeline = "multi_image_qa"


class DocQA(QA):
    """Questions about a page or chart: OCR first, high-resolution tiles where text is dense."""

    default_pipeline = "doc_qa"


@dataclasses.dataclass
class Session:
    """Follow-up questions about the same media; `turns` keeps every answer with its trace."""

    qa: QA
    media: Any
    turns: list[Answer] = dataclasses.field(default_factory=list)

    def ask(self, question: str) -> Answer:
        answer = self.qa.ask(self.media, question)
        self.turns.append(answer)
        return answer
