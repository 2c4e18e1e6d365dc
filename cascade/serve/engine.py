"""The served models: one live `QA` per pipeline, admission, a worker pool, limits and metrics.

Model ids are `cascade/<pipeline>`. Pipelines are built (validated) when the engine is; their
weights load in a background thread from start-up (`load_models`), and `readiness` says when
every served pipeline can answer (GET /health). Each id keeps one `QA` object for the life of the
server, so its stages (and their content-keyed caches: CLIP embeddings, OCR/detections, the VLM's
KV prefix) survive across requests: the second question about the same video skips the vision
work. Pipeline runs are blocking compute and go to a thread pool (`--workers`), never the event
loop. Runs overlap, those of one pipeline too: stages keep no per-run state, each model serializes
its own calls (`cascade.shared_models`), and the VLM decodes every running request in one
continuous batch (`cascade.vlm.batcher`), so throughput grows with concurrency.

A request is checked first (400s never wait), then admitted (`Admission`: at most
`max_concurrent` running, `max_queue` waiting in order, 429 + Retry-After beyond), then run. The
timeout covers the whole request, queue included. A request whose client disconnects, or that
times out, is cancelled: a queued one leaves the queue, a running one stops before its next stage
or the VLM's next token (another stage already running finishes). Its slot is held until its work
really ends, so abandoned work cannot pile up past `max_concurrent`.

The answer's tokens reach the caller as the VLM generates them: `run_async(on_token=...)` calls it
from the thread that decodes (the model's batch loop) with each `TokenEvent` of the answer
(`cascade.streaming`; a tool answer has none). The request's `max_tokens`, earlier turns and
sampling settings go to the pipeline's `max_new_tokens`, `history` and `sampling` inputs; a
pipeline without them refuses such a request (400) rather than ignore it.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..artifacts import Answer, Image
from ..decoding import SamplingParams
from ..errors import CascadeError, InputError, StageError, did_you_mean
from ..runner import StageExecutor
from ..stage import run_params
from ..streaming import silent
from ..trace import StageRecord
from .admission import Admission, QueueFull
from .bill import cache_events
from .config import ServeConfig
from .errors import APIError
from .fetch import MediaFetcher
from .media import Media, PixelBudget, decode_part, read_part, save_image, scrub
from .media_ids import MediaIds
from .metrics import Metrics
from .mm_params import check_limits, stage_params_of
from .protocol import ChatRequest
from .readiness import Readiness
from .uploads import Uploads

__all__ = ["Engine", "ServedModel", "RequestCancelled"]

log = logging.getLogger("cascade.serve")
PREFIX = "cascade/"


class RequestCancelled(Exception):
    """The request's client went away or its deadline passed: its run stops between stages."""


class _CancelHook:
    """A `StageHook` that stops a run once its request is cancelled. The request's event lives in
    a context variable, which the runner's stage threads inherit, so runs of one pipeline that
    overlap each watch their own request."""

    def __init__(self) -> None:
        self._event: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
            "cascade_cancel", default=None
        )

    @contextmanager
    def watching(self, event: threading.Event | None) -> Iterator[None]:
        """Runs started inside the block stop once `event` is set."""
        token = self._event.set(event)
        try:
            yield
        finally:
            self._event.reset(token)

    def before_stage(self, record: StageRecord) -> None:
        event = self._event.get()
        if event is not None and event.is_set():
            raise RequestCancelled(f"cancelled before stage '{record.name}'")

    def after_stage(self, record: StageRecord) -> None:
        pass


@dataclass
class ServedModel:
    id: str
    source: str  # shipped pipeline name or YAML path
    qa: Any  # cascade.api.QA
    media_types: dict[str, str]  # media input name -> its type (video, images, image, path)
    description: str = ""


def _image(media: Media, index: int) -> Image:
    """A decoded image part as the pipeline's `Image` (its `ImageEmbeds` when it came as such)."""
    if media.embeds is not None:
        return replace(media.embeds, source=media.label, media_index=index)
    assert media.pixels is not None  # a decoded image: its pixels, or its embeddings
    return Image(media.pixels, source=media.label, media_index=index)


def _kv_occupancy() -> dict[str, int]:
    """`cascade.vlm.kv_memory.kv_occupancy`, or zeros while no in-process VLM was ever loaded
    (so a scrape never imports torch)."""
    import sys

    if "cascade.vlm.batcher" not in sys.modules:
        return {"prefix_cache": 0, "decoding": 0}
    from ..vlm.kv_memory import kv_occupancy

    return kv_occupancy()


def _shipped_names() -> list[str]:
    from .. import pipelines as shipped

    return sorted(p.stem for p in Path(shipped.__file__).parent.glob("*.yaml"))


class Engine:
    """Builds the served models (validation only); `load_models` then loads their weights in the
    background, and `readiness` says when every one can answer.

    Where the heavy stages run elsewhere (Ray Serve replicas) the engine is told so:
    `load_models=False` (readiness then comes from probes) and `executor` (a
    `cascade.runner.StageExecutor` every served pipeline runs its stages through)."""

    def __init__(
        self,
        config: ServeConfig,
        *,
        load_models: bool = True,
        executor: StageExecutor | None = None,
    ):
        from ..api import QA

        self.config = config
        self._cancel = _CancelHook()
        self.metrics = Metrics()
        sources: dict[str, str] = {}
        if config.shipped:
            sources.update({n: n for n in _shipped_names()})
        sources.update(config.pipelines)
        self.models: dict[str, ServedModel] = {}
        self.skipped: dict[str, str] = {}  # shipped pipelines that cannot answer questions, and why
        for name, source in sources.items():
            try:
                options = config.model_options()
                if config.random_weights:
                    qa = QA.offline(source, device=config.device, model_options=options)
                else:
                    qa = QA(source, model=config.model, device=config.device, model_options=options)
            except CascadeError as e:
                if name in config.pipelines:
                    raise  # a pipeline the user asked for must load
                self.skipped[name] = str(e)
                continue
            spec = qa.pipeline.spec
            served = ServedModel(
                PREFIX + name,
                str(source),
                qa,
                {n: spec.inputs[n].type for n in qa.media_inputs},
                " ".join(spec.description.split()),
            )
            qa.pipeline.hooks.append(self._cancel)
            qa.pipeline.executor = executor
            self.models[served.id] = served
        if not self.models:
            raise InputError(
                "no servable pipeline: a pipeline needs a 'question' input, a media "
                "input (video/images/image/page) and an 'answer' output"
                + "".join(f"\n  {n}: {why}" for n, why in self.skipped.items())
            )
        self.executor = ThreadPoolExecutor(
            max_workers=max(1, config.workers), thread_name_prefix="cascade-serve"
        )
        self.uploads = Uploads(config.upload_dir)
        self.media_ids = MediaIds(config.media_cache_bytes)
        self.fetcher = MediaFetcher(
            tuple(config.allowed_media_domains),
            tuple(config.allow_media_networks),
            config.media_fetch_timeout,
            config.max_media_bytes,
            self.uploads.folder,
        )
        self._running: set[threading.Event] = set()  # the cancel events of requests in progress
        self._admission: Admission | None = None  # made on the serving event loop
        self._admission_loop: asyncio.AbstractEventLoop | None = None
        self.metrics.gauge(
            "cascade_requests_running",
            "Chat requests holding a slot (--max-concurrent).",
            lambda: self.busy,
        )
        self.metrics.gauge(
            "cascade_requests_queued",
            "Chat requests waiting for a slot (--max-queue).",
            lambda: self.queued,
        )
        for part in ("prefix_cache", "decoding"):

            def held(part: str = part) -> float:
                return float(_kv_occupancy()[part])

            self.metrics.gauge(
                f"cascade_kv_{part}_bytes",
                f"KV bytes held now by the in-process VLMs' {part.replace('_', ' ')}.",
                held,
            )
        self.readiness = Readiness(self.models, loaded=not load_models)
        self.metrics.gauge(
            "cascade_ready",
            "1 when every served pipeline can answer (GET /health), else 0.",
            lambda: float(self.readiness.check()[0]),
        )

    def load_models(self) -> None:
        """Load every served pipeline's models in a background thread (a request that arrives
        meanwhile waits for the stages it needs: each stage sets up once, under its own lock)."""
        self.readiness.load(
            {m: s.qa.setup for m, s in self.models.items()},
            describe=lambda e: scrub(str(e), self._labels([]))[:300],
        )

    # -- lookup and checks ----------------------------------------------------------------------
    def get(self, model: str) -> ServedModel:
        name = model if model.startswith(PREFIX) else PREFIX + model
        if name not in self.models:
            shown = model if len(model) <= 80 else model[:77] + "..."
            raise APIError(
                404,
                f"model '{shown}' does not exist{did_you_mean(name, self.models)}; "
                f"served: {', '.join(self.models)}",
                code="model_not_found",
                param="model",
            )
        return self.models[name]

    def check_media(self, served: ServedModel, kinds: list[str], labels: list[str]) -> None:
        """Refuse media the pipeline cannot use all of (400/413), before any work is done."""
        types, mid = set(served.media_types.values()), served.id
        takes_video = bool(types & {"video", "path"})
        takes_images = bool(types & {"images", "image", "path"})
        takes_many = "images" in types
        if not kinds:
            want = " or ".join(
                (["a video_url part"] if takes_video else [])
                + (["image_url parts (or a PDF in a file part)"] if takes_images else [])
            )
            raise APIError(
                400,
                f"model '{mid}' needs media: send {want} in a user message",
                code="missing_media",
                param="messages",
            )
        if len(set(kinds)) > 1:
            raise APIError(
                400,
                f"model '{mid}' takes a video or images, not both in one conversation",
                code="wrong_media",
                param="messages",
            )
        if kinds[0] == "video" and not takes_video:
            raise APIError(
                400,
                f"model '{mid}' takes images (image_url parts), not video; for "
                "videos use a video pipeline",
                code="wrong_media",
                param="messages",
            )
        if kinds[0] == "image" and not takes_images:
            raise APIError(
                400,
                f"model '{mid}' answers about one video (a video_url part), not images",
                code="wrong_media",
                param="messages",
            )
        if len(kinds) > 1 and (kinds[0] == "video" or not takes_many):
            what = "video" if kinds[0] == "video" else "image"
            raise APIError(
                400,
                f"model '{mid}' answers about one {what}, and this conversation "
                f"has {len(kinds)} different ones ({', '.join(labels)}); ask about "
                f"each {what} in its own conversation",
                code=f"too_many_{what}s",
                param=labels[-1],
            )
        if len(kinds) > self.config.max_frames:
            raise APIError(
                413,
                f"{len(kinds)} images in one request, over this server's limit of "
                f"{self.config.max_frames}",
                code="too_many_images",
                param="messages",
            )

    def check_request(self, req: ChatRequest, served: ServedModel) -> None:
        """Everything that can be refused before the request queues."""
        check_limits(
            ["image" if m.kind == "image_embeds" else m.kind for m in req.media],
            [m.param for m in req.media],
            self.config.limit_mm_per_prompt,
        )
        # A PDF's pages are images (how many is known once it is opened: `answer` checks again),
        # and so are embeddings.
        self.check_media(
            served,
            ["image" if m.kind in ("file", "image_embeds") else m.kind for m in req.media],
            [m.param for m in req.media],
        )
        self.stage_params(req, served)
        for m in req.media:  # a uuid sent alone must name kept media: refused before it queues
            if m.url is None and m.uuid is not None:
                self.media_ids.resolve(m.uuid, m.kind, None, m.param)
        inputs = served.qa.pipeline.spec.inputs
        if req.max_tokens is not None and "max_new_tokens" not in inputs:
            raise APIError(
                400,
                f"'max_tokens' cannot be honoured by '{served.id}': its pipeline "
                "has no max_new_tokens input (its VLM stage's param sets the answer "
                "length); leave max_tokens out",
                code="unsupported_parameter",
                param="max_tokens",
            )
        if req.sampling is not None and "sampling" not in inputs:
            field = req.sampling_fields[0]
            raise APIError(
                400,
                f"'{field}' cannot be honoured by '{served.id}': its pipeline has "
                "no sampling input (its VLM stage's `sampling` param sets how it "
                "decodes); leave the sampling fields out",
                code="unsupported_parameter",
                param=field,
            )
        if req.history and "history" not in inputs:
            raise APIError(
                400,
                f"'{served.id}' cannot put earlier turns into its prompt: its "
                "pipeline has no history input; send only the question (one user "
                "message, media included)",
                code="unsupported_parameter",
                param="messages",
            )

    def stage_params(self, req: ChatRequest, served: ServedModel) -> dict[Any, Any]:
        """The request's `mm_processor_kwargs` as {stage: params for this run} (400s naming
        the key). A stage run in a Ray replica is sent its params with the call."""
        return stage_params_of(req.mm_processor_kwargs, served.qa.pipeline.stages, served.id)

    # -- work ---------------------------------------------------------------------------------
    def pipeline_input(self, served: ServedModel, media: list[Media], stack: ExitStack) -> Any:
        """The (checked) media as the pipeline's media input wants it."""
        types = set(served.media_types.values())
        if media[0].kind == "video":
            return media[0].path
        if "images" in types:
            return [_image(m, i) for i, m in enumerate(media)]
        if "image" in types:
            return _image(media[0], 0)
        m = media[0]  # a `path` input: the pipeline opens the file itself
        if m.embeds is not None:
            raise APIError(
                400,
                f"{m.label}: '{served.id}' opens its image from a file, and embeddings are "
                "not one; send the image",
                code="wrong_media",
                param=m.label,
            )
        return m.path if m.path is not None else save_image(m, self.uploads, stack)

    def _labels(self, media: list[Media]) -> dict[Path, str]:
        """Server paths a message may contain, and what to show instead."""
        labels = {m.path: m.label for m in media if m.path is not None}
        labels[self.uploads.folder] = "<uploads>"
        if self.config.media_root is not None:
            labels[Path(self.config.media_root).resolve()] = "<media-root>"
        return labels

    def answer(
        self,
        served: ServedModel,
        media: list[Media],
        question: str,
        max_tokens: int | None = None,
        cancel: threading.Event | None = None,
        arrived: float | None = None,
        *,
        history: Sequence[tuple[str, str]] = (),
        sampling: SamplingParams | None = None,
        on_token: Callable[[Any], Any] | None = None,
        stage_params: Mapping[Any, Any] | None = None,
    ) -> Answer:
        """Run the pipeline (blocking); failures become APIErrors whose messages name request
        fields, not server paths. `arrived` (monotonic) is when the request came in: the time
        until the pipeline starts is recorded as queue wait. `on_token` gets the answer's tokens
        as they are generated; a set `cancel` stops the run before its next stage or token.
        `stage_params`: {stage: params} for this run only (`cascade.stage.run_params`)."""
        self.check_media(served, [m.kind for m in media], [m.label for m in media])
        extra: dict[str, Any] = {}
        if max_tokens is not None and "max_new_tokens" in served.qa.pipeline.spec.inputs:
            extra["max_new_tokens"] = max_tokens
        if sampling is not None:
            extra["sampling"] = sampling

        def token(event: Any) -> None:
            if cancel is not None and cancel.is_set():
                raise RequestCancelled("cancelled while the VLM was generating")
            if on_token is not None:
                on_token(event)

        try:
            with ExitStack() as stack:
                if arrived is not None:
                    self.metrics.observe(
                        "cascade_queue_wait_seconds", (served.id,), time.monotonic() - arrived
                    )
                if cancel is not None and cancel.is_set():
                    raise RequestCancelled("cancelled before it started")
                value = self.pipeline_input(served, media, stack)
                with self._cancel.watching(cancel), run_params(stage_params or {}):
                    answer = served.qa.ask(
                        value,
                        question,
                        history=history,
                        **extra,
                        on_token=token if on_token is not None else silent(token),
                    )
        except StageError as e:
            if isinstance(e.cause, RequestCancelled):
                raise e.cause from None
            msg = scrub(str(e), self._labels(media))
            if isinstance(e.cause, (InputError, APIError)):
                raise APIError(400, msg, code="invalid_input") from None
            log.exception("pipeline %s failed", served.id)
            raise APIError(500, msg, code="pipeline_error") from None
        except InputError as e:
            raise APIError(400, scrub(str(e), self._labels(media)), code="invalid_input") from None
        except CascadeError as e:
            log.exception("pipeline %s failed", served.id)
            raise APIError(500, scrub(str(e), self._labels(media)), code="pipeline_error") from None
        self.record_answer(served.id, answer)
        return answer

    def run_request(
        self,
        req: ChatRequest,
        served: ServedModel,
        cancel: threading.Event,
        arrived: float,
        on_token: Callable[[Any], Any] | None = None,
    ) -> Answer:
        """Decode the request's media and answer it (blocking; runs in a worker thread). Video
        uploads live in temporary files for exactly as long as this call."""
        if cancel.is_set():
            raise RequestCancelled("cancelled before it started")
        with ExitStack() as stack:
            budget = PixelBudget(self.config.max_total_pixels)
            media: list[Media] = []
            for m in req.media:
                sent = (
                    None
                    if m.url is None
                    else read_part(m.kind, m.url, self.config, m.param, m.filename, self.fetcher)
                )
                payload = (
                    sent
                    if m.uuid is None
                    else self.media_ids.resolve(m.uuid, m.kind, sent, m.param)
                )
                assert payload is not None  # a part has a url or a uuid (protocol._media, _file)
                if m.filename and payload.filename != m.filename:
                    payload = replace(payload, filename=m.filename)  # a kept PDF, named anew
                media += decode_part(payload, self.config, m.param, self.uploads, stack, budget)
                if sent is not None and m.uuid is not None:  # kept once it decodes
                    self.media_ids.keep(m.uuid, sent)
            return self.answer(
                served,
                media,
                req.question,
                req.max_tokens,
                cancel,
                arrived,
                history=req.history,
                sampling=req.sampling,
                on_token=on_token,
                stage_params=self.stage_params(req, served),
            )

    def _admission_now(self) -> Admission:
        loop = asyncio.get_running_loop()
        if self._admission is None or self._admission_loop is not loop:
            self._admission = Admission(self.config.max_concurrent, self.config.max_queue)
            self._admission_loop = loop
        return self._admission

    async def run_async(
        self, req: ChatRequest, served: ServedModel, on_token: Callable[[Any], Any] | None = None
    ) -> Answer:
        """Check, queue (429 when full), run on the pool, time out (504). Cancelling the caller
        (the client went away) cancels the request's work. `on_token` is called from the decoding
        thread with each token of the answer as the VLM generates it."""
        self.check_request(req, served)
        admission, arrived, cancel = self._admission_now(), time.monotonic(), threading.Event()
        self._running.add(cancel)
        try:
            return await self._admitted(req, served, on_token, admission, arrived, cancel)
        finally:
            self._running.discard(cancel)

    async def _admitted(
        self,
        req: ChatRequest,
        served: ServedModel,
        on_token: Callable[[Any], Any] | None,
        admission: Admission,
        arrived: float,
        cancel: threading.Event,
    ) -> Answer:
        """`run_async` once checked: queue, run, time out."""
        timeout = self.config.request_timeout_s
        try:
            await asyncio.wait_for(admission.enter(), timeout)
        except QueueFull as e:
            raise APIError(
                429, str(e), code="too_many_requests", headers={"Retry-After": str(e.retry_after)}
            ) from None
        except asyncio.TimeoutError:
            raise APIError(
                504,
                f"the request waited {timeout:g} s in the queue (--timeout) without a free slot",
                code="timeout",
            ) from None
        started = time.monotonic()
        try:
            fut = asyncio.get_running_loop().run_in_executor(
                self.executor, self.run_request, req, served, cancel, arrived, on_token
            )
        except RuntimeError:  # pool shut down
            admission.leave(0.0)
            raise APIError(503, "server is shutting down", code="shutting_down") from None

        def done(f: asyncio.Future) -> None:  # on the loop: the slot is free once the work ends
            admission.leave(time.monotonic() - started)
            if not f.cancelled():
                f.exception()  # retrieved: no "exception was never retrieved" noise

        fut.add_done_callback(done)
        try:
            return await asyncio.wait_for(
                asyncio.shield(fut), max(0.0, timeout - (started - arrived))
            )
        except asyncio.TimeoutError:
            cancel.set()
            raise APIError(
                504,
                f"the request did not finish within {timeout:g} s (--timeout); "
                "its pipeline stops before its next stage or token",
                code="timeout",
            ) from None
        except asyncio.CancelledError:
            cancel.set()
            raise

    @property
    def busy(self) -> int:
        return self._admission.running if self._admission else 0

    @property
    def queued(self) -> int:
        return self._admission.waiting if self._admission else 0

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
        m.inc("cascade_kv_bytes_total", (model,), b.kv_bytes)
        m.inc("cascade_kv_bytes_unpressed_total", (model,), b.kv_bytes_unpressed)
        if b.baseline_visual_tokens is not None:
            m.inc("cascade_baseline_visual_tokens_total", (model,), b.baseline_visual_tokens)
            m.add_saved(model, b.baseline_visual_tokens - b.visual_tokens)
        if b.baseline_prefill_flops is not None:
            m.inc("cascade_baseline_prefill_flops_total", (model,), b.baseline_prefill_flops)
        for cache, (hits, lookups) in cache_events(answer).items():
            m.inc("cascade_cache_hits_total", (cache,), hits)
            m.inc("cascade_cache_lookups_total", (cache,), lookups)

    def close(self) -> None:
        """Stop: queued runs are dropped, running ones stop before their next stage or token
        (the server has drained what it could, `cascade.serve.stopping`)."""
        for cancel in list(self._running):
            cancel.set()
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.uploads.close()
