"""Question answering over videos, image sets and documents, in a few lines.

    from cascade import VideoQA
    qa = VideoQA(model="Qwen/Qwen2-VL-2B-Instruct")
    answer = qa.ask("clip.mp4", "What does the sign say?")
    answer.text, answer.evidence, answer.trace

Each class is a shipped pipeline (or your YAML) with the media input filled from `media`; the
answer carries its evidence and its bill. `qa.session(media)` keeps the media fixed for follow-up
questions: earlier turns go into the VLM's prompt, the content-keyed caches (CLIP embeddings, the
VLM's KV prefix) make later turns skip the vision work, and each turn's trace shows the hits.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .artifacts import Answer
from .decoding import SamplingParams, sampling_params, tool_answer_json
from .errors import InputError, SpecError
from .pipeline import Pipeline
from .streaming import answer_stream

__all__ = ["QA", "VideoQA", "MultiImageQA", "DocQA", "Session"]

# Which pipeline input receives the media, in order of preference.
_MEDIA_INPUTS = ("video", "images", "image")
_VIDEO_SUFFIXES = {".mp4", ".mkv", ".mov", ".avi", ".webm", ".m4v", ".mpg", ".mpeg", ".ts", ".flv"}


class QA:
    """Ask questions through a pipeline whose outputs include `answer: Answer`.

    pipeline: shipped pipeline name (`cascade run` names) or a YAML path.
    model: VLM to use (hub id or local dir); sets `id` on every model the pipeline declares.
    device: "cpu", "cuda", ...; set on every declared model and every stage with a `device` param.
    overrides: more settings by dotted path, e.g. {"retrieve.top_k": 4, "models.vlm.keep_ratio":
    0.5}.
    type_overrides: params for every stage of a type, e.g. {"clip_embed": {"pretrained": None}}.
    model_options: fields set on every model the pipeline declares, e.g. {"max_num_seqs": 8}.
    """

    default_pipeline = "video_qa"

    def __init__(
        self,
        pipeline: str | Path | None = None,
        *,
        model: str | None = None,
        device: str | None = None,
        overrides: dict[str, Any] | None = None,
        type_overrides: dict[str, dict[str, Any]] | None = None,
        model_options: dict[str, Any] | None = None,
    ):
        by_type = {k: dict(v) for k, v in (type_overrides or {}).items()}
        models: dict[str, Any] = dict(model_options or {})
        if model is not None:
            models["id"] = model
        if device is not None:
            models["device"] = device
            by_type.setdefault("*", {})["device"] = device
        self.pipeline = Pipeline.load(
            pipeline or self.default_pipeline, overrides, type_params=by_type, model_params=models
        )
        if "answer" not in self.pipeline.spec.outputs:
            raise SpecError(
                f"pipeline '{self.pipeline.name}' has no 'answer' output; QA needs one",
                file=self.pipeline.file,
            )
        self.media_inputs = [n for n in _MEDIA_INPUTS if n in self.pipeline.spec.inputs]
        if not self.media_inputs or "question" not in self.pipeline.spec.inputs:
            raise SpecError(
                f"pipeline '{self.pipeline.name}' needs a 'question' input and one of "
                f"{', '.join(_MEDIA_INPUTS)}",
                file=self.pipeline.file,
            )

    def _media_input(self, media: Any) -> str:
        """Which input `media` goes to, for pipelines (the baselines) that take a video or
        images."""
        if len(self.media_inputs) == 1:
            return self.media_inputs[0]
        is_video = isinstance(media, (str, Path)) and Path(media).suffix.lower() in _VIDEO_SUFFIXES
        wanted = "video" if is_video else "images"
        return wanted if wanted in self.media_inputs else self.media_inputs[0]

    @classmethod
    def offline(
        cls,
        pipeline: str | Path | None = None,
        size: str = "test",
        *,
        model: str | None = None,
        **kwargs: Any,
    ) -> QA:
        """Random-weight models, for machines without a model hub (tests, demos, benchmarks).

        The VLM is a tiny Qwen2-VL built from a config (`cascade.vlm.build_tiny_vlm`, `size`
        "test" or "bench"), or the checkpoint folder `model` (e.g. another tiny family:
        `QA.offline("multi_image_qa", model=str(build_tiny_vlm(family="qwen3_vl")))`); CLIP is
        randomly initialised. Costs, token counts and timings are real for the architectures, the
        VLM's answers are noise. OCR and detection stay real models. Routes are priced as the
        declared checkpoint (`model_options={"priced_as": ...}` says otherwise).
        """
        offline = offline_params(size)
        by_type = offline["type_params"]
        for k, v in (kwargs.pop("type_overrides", None) or {}).items():
            by_type.setdefault(k, {}).update(v)
        options = {
            "priced_as": offline["model_params"]["priced_as"],
            **(kwargs.pop("model_options", None) or {}),
        }
        return cls(
            pipeline,
            model=model or offline["model_params"]["id"],
            type_overrides=by_type,
            model_options=options,
            **kwargs,
        )

    def ask(
        self,
        media: Any,
        question: str,
        *,
        history: Sequence[tuple[str, str]] = (),
        sampling: SamplingParams | Mapping[str, Any] | None = None,
        schema: Mapping[str, Any] | None = None,
        on_token: Callable[[Any], Any] | None = None,
        route_policy: str | None = None,
        **inputs: Any,
    ) -> Answer:
        """Answer `question` about `media` (a video path, image paths/arrays/PIL images, or one
        image).

        history: the conversation's earlier (question, answer) turns, put into the VLM's prompt
        (needs a pipeline with a `history` input; every shipped VLM pipeline has one).
        sampling: decoding settings for the VLM's answer (`cascade.decoding.SamplingParams` or a
        mapping of its fields: temperature, top_p, top_k, min_p, seed, penalties, n, stop,
        stop_token_ids, logprobs, top_logprobs, max_tokens), over the VLM stage's own; the
        answer's `completions` hold the n completions (a tool answer has none). Needs a pipeline
        with a `sampling` input (every shipped VLM pipeline has one).
        schema: a JSON Schema the answer's text must match (`sampling`'s response_format
        json_schema, in short): the VLM decodes under its grammar; a tool answer is put into
        the schema's slot for it (`cascade.decoding.tool_answer_json`).
        on_token: called with each `cascade.vlm.decode.TokenEvent` of the answer as the VLM
        generates it (in the VLM's thread); a tool answer streams nothing.
        route_policy: "cost" (the cheaper of the whole media and the cascade, on this device),
        "cascade" or "full" (that path), over the pipeline's own (its `path_route` stage's
        `policy`); needs a pipeline with a `route_policy` input (doc_qa, multi_image_qa,
        video_qa). `max_visual_tokens=N` (an input of the same pipelines) cascades whole media
        over N visual tokens.
        inputs: other pipeline inputs, e.g. max_new_tokens=32."""
        if not isinstance(question, str) or not question.strip():
            raise InputError("question must be a non-empty string")
        if route_policy is not None:
            from .routers.path_route import check_policy

            if "route_policy" not in self.pipeline.spec.inputs:
                raise InputError(
                    f"route_policy: pipeline '{self.pipeline.name}' has no 'route_policy' input "
                    "(no path_route stage to steer)"
                )
            inputs["route_policy"] = check_policy(route_policy, "route_policy")
        if history:
            if "history" not in self.pipeline.spec.inputs:
                raise InputError(
                    f"pipeline '{self.pipeline.name}' has no 'history' input: it "
                    "cannot put earlier turns into its prompt"
                )
            inputs["history"] = history
        if schema is not None:
            sampling = dict(
                sampling_params(
                    dict(sampling) if isinstance(sampling, Mapping) else sampling
                ).model_dump(exclude_unset=True),
                response_format={"type": "json_schema", "schema": dict(schema)},
            )
        if sampling is not None:
            if "sampling" not in self.pipeline.spec.inputs:
                raise InputError(
                    f"pipeline '{self.pipeline.name}' has no 'sampling' input: its "
                    "VLM stage's `sampling` param sets how it decodes"
                )
            inputs["sampling"] = sampling_params(
                dict(sampling) if isinstance(sampling, Mapping) else sampling
            )
        target = self._media_input(media)
        if target == "images" and not isinstance(media, (list, tuple)):
            media = [media]
        with answer_stream(on_token) if on_token is not None else contextlib.nullcontext():
            result = self.pipeline.run(**{target: media, "question": question, **inputs})
        answer = result["answer"]
        if answer is None:
            raise InputError(
                f"pipeline '{self.pipeline.name}' produced no answer; see the trace: "
                + "; ".join(f"{r.name}: {r.status} {r.detail}" for r in result.trace.stages)
            )
        fmt = inputs["sampling"].response_format if "sampling" in inputs else None
        if fmt is not None and answer.produced_by == "tool":
            answer = dataclasses.replace(answer, text=tool_answer_json(answer.text, fmt))
        if answer.bill.path is not None:  # priced by a path route: show what was spent beside it
            spent = answer.bill.with_spent(result.trace.seconds, result.trace.cpu_seconds)
            answer = dataclasses.replace(answer, bill=spent)
        return dataclasses.replace(answer, trace=result.trace)

    def session(self, media: Any) -> Session:
        """A multi-turn conversation over fixed media."""
        return Session(self, media)

    def setup(self) -> QA:
        """Load every model now rather than on the first question."""
        self.pipeline.setup()
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}(pipeline={self.pipeline.name!r}, media={self.media_inputs})"


def offline_params(size: str = "test") -> dict[str, Any]:
    """`Pipeline.load` keyword arguments that make a pipeline run with no model hub (`QA.offline`,
    `cascade run --offline`): every declared model becomes the tiny random-weight Qwen2-VL, CLIP
    random, retrieval text-led (the detector's default is already the bundled YOLO11n ONNX).
    Routes stay priced as the declared checkpoint (`priced_as`), not as the tiny stand-in: a
    random tiny model would make every whole image look cheap."""
    from .spec import PRICED_AS_DECLARED
    from .vlm import build_tiny_vlm

    return {
        "model_params": {"id": str(build_tiny_vlm(size=size)), "priced_as": PRICED_AS_DECLARED},
        "type_params": {
            "clip_embed": {"pretrained": None},
            # Random CLIP ranks frames by noise: let the text side (real OCR +
            # MiniLM) rank.
            "retrieve": {"clip_weight": 0.0},
        },
    }


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
    """Follow-up questions about the same media; `turns` keeps every answer with its trace.

    Each turn runs the pipeline on the fixed media, so everything keyed by the media's content is
    reused (decoded frames' embeddings, OCR and detections, the VLM's KV prefix when the same
    pixels reach it). Earlier questions and answers go into the VLM's prompt as history when the
    pipeline has a `history` input (every shipped VLM pipeline does), after the media: the KV
    prefix of the media is still a hit. `cascade.vlm.VLM.session` is the lower layer that also
    keeps the conversation's own KV cache between turns.
    """

    qa: QA
    media: Any
    turns: list[Answer] = dataclasses.field(default_factory=list)
    questions: list[str] = dataclasses.field(default_factory=list)

    def ask(self, question: str, **kwargs: Any) -> Answer:
        """The next turn; kwargs as `QA.ask` (on_token, max_new_tokens, ...)."""
        history = list(zip(self.questions, (a.text for a in self.turns), strict=False))
        if "history" not in self.qa.pipeline.spec.inputs:
            history = []  # a pipeline without a history input answers each turn on its own
        answer = self.qa.ask(self.media, question, history=history, **kwargs)
        self.questions.append(question)
        self.turns.append(answer)
        return answer
