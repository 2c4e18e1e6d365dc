"""The served models: one live `QA` per pipeline, a bounded worker pool, limits and metrics.

Model ids are `cascade/<pipeline>`. Each id keeps one `QA` object for the life of the server, so
its stages (and their content-keyed caches: CLIP embeddings, OCR/detections, the VLM's KV prefix)
survive across requests: the second question about the same video skips the vision work. Pipeline
runs are blocking compute and go to a thread pool, never the event loop. Runs of one pipeline are
serialized by a lock (stage objects and the VLM's caches are shared, not thread-safe); different
pipelines run side by side. A request that waits past the timeout gets 504, but its slot stays
taken until its run really ends, so timed-out work cannot pile up past `max_concurrent`.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts import Answer, Image
from ..errors import CascadeError, InputError, StageError, did_you_mean
from .bill import cache_events
from .config import ServeConfig
from .errors import APIError
from .media import Media, load_media_url, save_image
from .metrics import Metrics
from .protocol import ChatRequest

__all__ = ["Engine", "ServedModel"]

log = logging.getLogger("cascade.serve")
PREFIX = "cascade/"


@dataclass
class ServedModel:
    id: str
    source: str  # shipped pipeline name or YAML path
    qa: Any  # cascade.api.QA
    media_types: dict[str, str]  # media input name -> its type (video, images, image, path)
    description: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)


def _shipped_names() -> list[str]:
    from .. import pipelines as shipped

    return sorted(p.stem for p in Path(shipped.__file__).parent.glob("*.yaml"))


class Engine:
    """Builds the served models at start (validation only; weights load on first use)."""

    def __init__(self, config: ServeConfig):
        from ..api import QA

        self.config = config
        self.metrics = Metrics()
        sources: dict[str, str] = {}
        if config.shipped:
            sources.update({n: n for n in _shipped_names()})
        sources.update(config.pipelines)
        self.models: dict[str, ServedModel] = {}
        self.skipped: dict[str, str] = {}  # shipped pipelines that cannot answer questions, and why
        for name, source in sources.items():
            try:
                if config.random_weights:
                    qa = QA.offline(source, device=config.device)
                else:
                    qa = QA(source, model=config.model, device=config.device)
            except CascadeError as e:
                if name in config.pipelines:
                    raise  # a pipeline the user asked for must load
                self.skipped[name] = str(e)
                continue
            spec = qa.pipeline.spec
            self.models[PREFIX + name] = ServedModel(
                PREFIX + name, str(source), qa, {n: spec.inputs[n].type for n in qa.media_inputs},
                " ".join(spec.description.split()))
        if not self.models:
            raise InputError("no servable pipeline: a pipeline needs a 'question' input, a media "
                             "input (video/images/image/page) and an 'answer' output"
                             + "".join(f"\n  {n}: {why}" for n, why in self.skipped.items()))
        self.executor = ThreadPoolExecutor(max_workers=max(1, config.workers),
                                           thread_name_prefix="cascade-serve")
        self._slots = threading.Lock()
        self._busy = 0

    # -- lookup -------------------------------------------------------------------------------
    def get(self, model: str) -> ServedModel:
        name = model if model.startswith(PREFIX) else PREFIX + model
        if name not in self.models:
            raise APIError(404, f"model '{model}' does not exist{did_you_mean(name, self.models)}; "
                           f"served: {', '.join(self.models)}", code="model_not_found", param="model")
        return self.models[name]

    # -- work ---------------------------------------------------------------------------------
    def pipeline_input(self, served: ServedModel, media: list[Media]) -> Any:
        """The media as the pipeline's media input wants it (raises APIError 400 on a mismatch)."""
        kinds = {m.kind for m in media}
        types, mid = set(served.media_types.values()), served.id
        takes_video = bool(types & {"video", "path"})
        takes_images = bool(types & {"images", "image", "path"})
        if not media:
            want = " or ".join((["a video_url part"] if takes_video else [])
                               + (["image_url parts"] if takes_images else []))
            raise APIError(400, f"model '{mid}' needs media: send {want} in a user message",
                           code="missing_media", param="messages")
        if len(kinds) > 1:
            raise APIError(400, f"model '{mid}' takes a video or images, not both in one "
                           "conversation", code="wrong_media", param="messages")
        if "video" in kinds:
            if not takes_video:
                raise APIError(400, f"model '{mid}' takes images (image_url parts), not video; for "
                               "videos use a video pipeline", code="wrong_media", param="messages")
            return media[-1].path  # the latest video of the conversation
        if not takes_images:
            raise APIError(400, f"model '{mid}' answers about one video (a video_url part), not "
                           "images", code="wrong_media", param="messages")
        if len(media) > self.config.max_frames:
            raise APIError(413, f"{len(media)} images in one request, over this server's limit of "
                           f"{self.config.max_frames}", code="too_many_images", param="messages")
        images = [Image(m.pixels, source=m.label, media_index=i) for i, m in enumerate(media)]
        if "images" in types:
            return images
        if "image" in types:  # a single-image pipeline reads the latest image of the conversation
            return images[-1]
        last = media[-1]  # a `path` input: the pipeline opens the file itself
        return last.path if last.path is not None else save_image(last, self.config)

    def answer(self, served: ServedModel, media: list[Media], question: str,
               max_tokens: int | None = None) -> Answer:
        """Run the pipeline (blocking); pipeline failures become APIErrors with a clear message."""
        value = self.pipeline_input(served, media)
        extra = {}
        if max_tokens is not None and "max_new_tokens" in served.qa.pipeline.spec.inputs:
            extra["max_new_tokens"] = max_tokens
        try:
            with served.lock:
                answer = served.qa.ask(value, question, **extra)
        except StageError as e:
            if isinstance(e.cause, (InputError, APIError)):
                raise APIError(400, str(e), code="invalid_input") from None
            log.exception("pipeline %s failed", served.id)
            raise APIError(500, str(e), code="pipeline_error") from None
        except InputError as e:
            raise APIError(400, str(e), code="invalid_input") from None
        except CascadeError as e:
            log.exception("pipeline %s failed", served.id)
            raise APIError(500, str(e), code="pipeline_error") from None
        self.record_answer(served.id, answer)
        return answer

    def run_request(self, req: ChatRequest, served: ServedModel) -> Answer:
        """Decode the request's media and answer it (blocking; runs in a worker thread)."""
        media = [load_media_url(m.kind, m.url, self.config, m.param) for m in req.media]
        return self.answer(served, media, req.question, req.max_tokens)

    async def run_async(self, req: ChatRequest, served: ServedModel) -> Answer:
        """`run_request` on the pool with the concurrency cap (429) and the timeout (504)."""
        with self._slots:
            if self._busy >= self.config.max_concurrent:
                raise APIError(429, f"server busy: {self._busy} requests running (limit "
                               f"{self.config.max_concurrent}); retry shortly", code="too_many_requests")
            self._busy += 1

        def job() -> Answer:
            try:
                return self.run_request(req, served)
            finally:
                with self._slots:
                    self._busy -= 1

        try:
            fut = asyncio.get_running_loop().run_in_executor(self.executor, job)
        except RuntimeError:  # pool shut down
            with self._slots:
                self._busy -= 1
            raise APIError(503, "server is shutting down", code="shutting_down") from None
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.config.request_timeout_s)
        except asyncio.TimeoutError:
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # no "never retrieved" noise
            raise APIError(504, f"the pipeline did not finish within {self.config.request_timeout_s:g} s "
                           "(--timeout); it keeps running and its caches will help a retry",
                           code="timeout") from None

    @property
    def busy(self) -> int:
        return self._busy

    # -- metrics ------------------------------------------------------------------------------
    def record_answer(self, model: str, answer: Answer) -> None:
        m, b = self.metrics, answer.bill
        m.inc("cascade_answers_total", (model, answer.produced_by))
        m.inc("cascade_visual_tokens_total", (model,), b.visual_tokens)
        m.inc("cascade_vision_flops_total", (model,), b.vision_flops)
        m.inc("cascade_prefill_flops_total", (model,), b.prefill_flops)
        m.inc("cascade_decode_flops_total", (model,), b.decode_flops)
        m.inc("cascade_prompt_tokens_total", (model,), b.input_tokens)
        m.inc("cascade_completion_tokens_total", (model,), b.generated_tokens)
        if b.baseline_visual_tokens is not None:
            m.inc("cascade_baseline_visual_tokens_total", (model,), b.baseline_visual_tokens)
            m.inc("cascade_visual_tokens_saved_total", (model,), b.baseline_visual_tokens - b.visual_tokens)
        if b.baseline_prefill_flops is not None:
            m.inc("cascade_baseline_prefill_flops_total", (model,), b.baseline_prefill_flops)
        for cache, (hits, lookups) in cache_events(answer).items():
            m.inc("cascade_cache_hits_total", (cache,), hits)
            m.inc("cascade_cache_lookups_total", (cache,), lookups)

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
