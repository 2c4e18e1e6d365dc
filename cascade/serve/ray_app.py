"""The same YAML pipelines served on Ray Serve: heavy stages as deployments, light ones in the ingress.

    cascade serve --ray --replicas 2 --tiny             # a local Ray cluster, 2 VLM replicas
    cascade serve --ray --address ray://head:10001      # an existing cluster
    serve run serve_config.yaml                         # written by `cascade deploy`

The application (`build_app(args)`, an application builder `serve run` can import):

- `ingress`: the FastAPI app of `cascade.serve.app.create_app` over the usual `Engine` (same
  OpenAI-compatible API, request checks, admission queue, limits, errors), on one Serve
  deployment. Its pipelines carry a `RemoteStages` executor (`Pipeline.executor`): the light
  stages (sources, thumbnails, tiles, routers, retrieval, answer composition) run in the ingress,
  the heavy stage types (`HEAVY_STAGES`) go to their deployments through Serve handles.
  `/health` adds `"replicas"` (running replicas per deployment, from `serve.status()`) and
  answers 503 while a deployment the pipelines use has no running replica (a readiness probe);
  `/metrics` adds what the replicas report (per-replica cumulative counters, summed), through a
  `prometheus_client` collector.
- one deployment per heavy stage type (`vlm_answer`, `ocr`, `detect`, `clip_embed`,
  `text_embed`): each replica builds every configuration of that type the pipelines use and sets
  it up (loads its model) before it reports running; `run(key, inputs)` runs one stage call and
  returns its outputs with the counters and warnings it recorded, so the ingress trace is the
  trace an in-process run writes. Stage failures come back as the stage's own exception (a
  client mistake is still a 400).
- arrays: a large input (an image or a list of them, e.g. a video's frames) is `ray.put` once by
  the ingress and the same ObjectRef goes to every deployment that reads it (OCR, detector,
  CLIP), so the frames are serialised once, not once per hop; a replica on the same node maps it
  from the shared-memory object store without a copy.
- affinity: every `vlm_answer` call carries a media id (a hash of its images' content and the
  stage configuration), which the replica registers through `@serve.multiplexed`. A call about
  media this ingress has sent before (a conversation's follow-up) is sent with
  `multiplexed_model_id` = that id, and Serve's router sends it to a replica that has it, so it
  finds its KV prefix in that replica's cache. A first turn is routed by load (power of two
  choices) instead: Serve's multiplex fallback would send a burst of new ids to the one replica
  with the fewest ids until the replicas' id lists propagate (every 0.1 s).
- batching: `@serve.batch` gathers concurrent `vlm_answer` calls of one replica; two or more
  calls about media the replica has not answered yet are answered with one `generate_batch`
  (one batched prefill, lockstep decode). A batch bypasses the KV prefix cache, so a call about
  media the replica has answered before (a follow-up) and a batch of one take the single
  `generate` path, which reads and writes the cache.
- streaming: when the request streams, its answering `vlm_answer` call goes to
  `run_streaming`, a generator method called through a streaming handle: every token is yielded
  as the replica's VLM chooses it and reaches the client's SSE stream at once, then the reply.
  Streamed calls are not batched.
- faults: a call whose replica dies (`RayActorError`: died, unavailable) is sent again, up to
  `retries` times (unless tokens had already been streamed to the client); Serve starts a
  replacement replica by itself.
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import importlib
import logging
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from ray import serve

from ..cache import content_hash, nbytes_of
from ..errors import CascadeError, did_you_mean
from ..stage import Stage
from ..streaming import answer_stream, claim_stream, is_silent
from ..trace import StageRecord, mark_cached, record, stage_scope, warn
from .config import ServeConfig

__all__ = ["HEAVY_STAGES", "RayOptions", "RemoteStages", "build_app", "app_args",
           "split_args", "StageReplica", "VLMReplica", "APP_NAME"]

log = logging.getLogger("cascade.serve.ray")
APP_NAME = "cascade"
HEAVY_STAGES = ("vlm_answer", "ocr", "detect", "clip_embed", "text_embed")
_PUT_MIN_BYTES = 64 << 10  # inputs at least this large travel as ObjectRefs
_REF_CACHE_BYTES = 512 << 20  # recently put inputs kept for reuse by later hops (at most)


@dataclass
class RayOptions:
    """How the application is laid out on the cluster (the `args` of `build_app` besides the
    `ServeConfig` fields).

    replicas: VLM (`vlm_answer`) replicas; stage_replicas: replicas of every other heavy
    deployment. num_cpus / num_gpus: Ray resources per replica, by deployment name (unnamed:
    `vlm_answer` 1 CPU, others 0.5, the ingress 0.5; no GPU). threads: torch threads per
    replica (None: leave torch's default, which Ray sets from num_cpus). remote_stages: the stage
    types that run in deployments. imports: modules each replica imports first (stage plugins).
    max_batch_size / batch_wait_timeout_s: `@serve.batch` of the VLM. retries: how often a call
    whose replica died is sent again. call_timeout_s: longest wait for one stage call.
    """

    replicas: int = 1
    stage_replicas: int = 1
    num_cpus: dict[str, float] = field(default_factory=dict)
    num_gpus: dict[str, float] = field(default_factory=dict)
    threads: int | None = None
    remote_stages: tuple[str, ...] = HEAVY_STAGES
    imports: tuple[str, ...] = ()
    max_batch_size: int = 4
    batch_wait_timeout_s: float = 0.01
    retries: int = 2
    call_timeout_s: float = 600.0
    health_check_period_s: float | None = None  # Serve's default (10 s) when None

    def cpus(self, deployment: str) -> float:
        default = 1.0 if deployment == "vlm_answer" else 0.5
        return float(self.num_cpus.get(deployment, default))

    def gpus(self, deployment: str) -> float:
        return float(self.num_gpus.get(deployment, 0.0))

    def replicas_of(self, deployment: str) -> int:
        return self.replicas if deployment == "vlm_answer" else self.stage_replicas


# -- args: what a Serve config's `args:` holds -------------------------------------------------------
_CONFIG_FIELDS = {f.name for f in dataclasses.fields(ServeConfig)}
_OPTION_FIELDS = {f.name for f in dataclasses.fields(RayOptions)}


def app_args(config: ServeConfig, options: RayOptions | None = None) -> dict[str, Any]:
    """`build_app`'s args (plain YAML/JSON values) for a server config and a layout."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(ServeConfig):
        v = getattr(config, f.name)
        out[f.name] = str(v) if isinstance(v, Path) else (dict(v) if isinstance(v, dict) else v)
    for f in dataclasses.fields(RayOptions):
        v = getattr(options or RayOptions(), f.name)
        out[f.name] = list(v) if isinstance(v, tuple) else (dict(v) if isinstance(v, dict) else v)
    return out


def split_args(args: dict[str, Any] | None) -> tuple[ServeConfig, RayOptions]:
    """The `ServeConfig` and `RayOptions` in `build_app`'s args (unknown keys are errors)."""
    args = dict(args or {})
    unknown = sorted(set(args) - _CONFIG_FIELDS - _OPTION_FIELDS)
    if unknown:
        raise CascadeError(f"unknown build_app arg '{unknown[0]}'"
                           f"{did_you_mean(unknown[0], sorted(_CONFIG_FIELDS | _OPTION_FIELDS))}")
    cfg = {k: v for k, v in args.items() if k in _CONFIG_FIELDS}
    for k in ("media_root", "upload_dir"):
        if cfg.get(k) is not None:
            cfg[k] = Path(cfg[k])
    opts = {k: v for k, v in args.items() if k in _OPTION_FIELDS}
    for k in ("remote_stages", "imports"):
        if k in opts:
            opts[k] = tuple(opts[k])
    return ServeConfig(**cfg), RayOptions(**opts)


# -- stage configurations ------------------------------------------------------------------------
def stage_config(stage_obj: Stage) -> dict[str, Any]:
    """What a replica needs to rebuild `stage_obj`: type, name, params, the models it names."""
    from ..models import model_params

    names = [getattr(stage_obj.params, p) for p in model_params(type(stage_obj).Params)]
    models = {n: stage_obj.models[n].spec.model_dump() for n in names if n is not None}
    return {"type": stage_obj.type_name, "name": stage_obj.name,
            "params": stage_obj.params.model_dump(), "models": models}


def stage_key(config: dict[str, Any]) -> str:
    """Stages of the same type, params and models are one configuration (the name aside)."""
    return content_hash({k: config[k] for k in ("type", "params", "models")})[:16]


def _build_stage(config: dict[str, Any], tiny: bool) -> Stage:
    from ..models import Models
    from ..registry import get_stage_class

    models = {}
    for name, spec in config["models"].items():
        spec = dict(spec)
        if tiny and spec.get("backend", "transformers") == "transformers" and not Path(spec["id"]).exists():
            from ..vlm.tiny import build_tiny_vlm  # another machine: build the same tiny model here

            spec["id"] = str(build_tiny_vlm(size="test"))
        models[name] = spec
    cls = get_stage_class(config["type"])
    return cls(config["params"], name=config["name"], models=Models(models))


def _prepare_process(options: RayOptions) -> None:
    """Per-replica process setup: stage plugins to import, torch threads."""
    for mod in options.imports:
        importlib.import_module(mod)
    if options.threads:
        import torch

        torch.set_num_threads(int(options.threads))


def _replica_id() -> str:
    try:
        return serve.get_replica_context().replica_id.unique_id
    except Exception:  # outside Serve (unit use)
        return f"pid{os.getpid()}"


# -- replicas ------------------------------------------------------------------------------------
class _Failure:
    """A stage's exception, carried back to the ingress (re-raised there as the stage's own)."""

    def __init__(self, exc: BaseException):
        try:
            import pickle

            pickle.loads(pickle.dumps(exc))
            self.exc = exc
        except Exception:
            self.exc = RuntimeError(f"{type(exc).__name__}: {exc}")


class StageReplica:
    """One replica of a heavy stage type: every configuration the pipelines use, set up."""

    def __init__(self, stage_type: str, configs: dict[str, dict[str, Any]],
                 options: dict[str, Any] | None = None, tiny: bool = False):
        self.options = RayOptions(**(options or {}))
        _prepare_process(self.options)
        self.stage_type = stage_type
        self.stages = {key: _build_stage(cfg, tiny) for key, cfg in configs.items()}
        for st in self.stages.values():
            st.ensure_setup()  # load before the replica reports running
        self.replica = _replica_id()
        self._lock = threading.Lock()
        self.stats: dict[str, float] = {"calls": 0, "errors": 0, "busy_seconds": 0.0}

    def _count(self, **delta: float) -> dict[str, float]:
        with self._lock:
            for k, v in delta.items():
                self.stats[k] = self.stats.get(k, 0) + v
            return dict(self.stats)

    def _inputs(self, payload: dict[str, tuple[str, Any]]) -> dict[str, Any]:
        import ray

        return {port: ray.get(v) if how == "ref" else v for port, (how, v) in payload.items()}

    def _reply(self, rec: StageRecord, out: Any, seconds: float, **extra: float) -> dict[str, Any]:
        failed = isinstance(out, _Failure)
        stats = self._count(calls=1, errors=int(failed), busy_seconds=seconds, **extra)
        return {"out": out, "counters": dict(rec.counters), "warnings": list(rec.warnings),
                "status": rec.status, "replica": self.replica, "stats": stats}

    def _run_one(self, key: str, inputs: dict[str, Any]) -> dict[str, Any]:
        stage = self.stages[key]
        rec, t0 = StageRecord(stage.name, stage.type_name), time.perf_counter()
        try:
            with stage_scope(rec):
                out = stage.run(**inputs)
        except Exception as e:
            out = _Failure(e)
        return self._reply(rec, out, time.perf_counter() - t0)

    async def run(self, key: str, payload: dict[str, tuple[str, Any]]) -> dict[str, Any]:
        if key not in self.stages:
            return {"out": _Failure(CascadeError(f"deployment '{self.stage_type}' has no stage "
                                                 f"configuration {key}; redeploy the application")),
                    "counters": {}, "warnings": [], "status": "failed", "replica": self.replica,
                    "stats": self._count(calls=1, errors=1)}
        inputs = await asyncio.to_thread(self._inputs, payload)
        return await asyncio.to_thread(self._run_one, key, inputs)

    async def info(self) -> dict[str, Any]:
        return {"replica": self.replica, "pid": os.getpid(), "stats": self._count()}


_BATCH_PARAMS = {"model", "max_new_tokens", "reduction", "keep_ratio", "fastv_layer",
                 "system_prompt", "stream"}
_BATCH_INPUTS = {"images", "question", "hint", "max_new_tokens", "history"}


class VLMReplica(StageReplica):
    """A `vlm_answer` replica: media affinity (`@serve.multiplexed`) and `@serve.batch`."""

    def __init__(self, stage_type: str, configs: dict[str, dict[str, Any]],
                 options: dict[str, Any] | None = None, tiny: bool = False):
        super().__init__(stage_type, configs, options, tiny)
        self._answered: OrderedDict[str, None] = OrderedDict()  # media this replica has cached
        self._batched.set_max_batch_size(self.options.max_batch_size)
        self._batched.set_batch_wait_timeout_s(self.options.batch_wait_timeout_s)

    @serve.multiplexed(max_num_models_per_replica=256)
    async def _media(self, media_id: str) -> str:
        """Nothing to load: registering the id is what routes the conversation here."""
        return media_id

    def _remember(self, media_id: str) -> None:
        with self._lock:
            self._answered[media_id] = None
            self._answered.move_to_end(media_id)
            while len(self._answered) > 4096:
                self._answered.popitem(last=False)

    def _batchable(self, key: str, inputs: dict[str, Any]) -> bool:
        stage = self.stages.get(key)
        if stage is None or set(inputs) - _BATCH_INPUTS:
            return False
        if set(stage.Params.model_fields) - _BATCH_PARAMS:
            return False  # a param the batch path does not know: answer it one by one
        p = stage.params
        if inputs.get("history") or inputs.get("max_new_tokens") not in (None, p.max_new_tokens):
            return False  # a conversation or its own length: the single path
        red = stage.model(p.model).reduction(p.reduction, p.keep_ratio, p.fastv_layer)
        return not red.question_dependent

    async def run(self, key: str, payload: dict[str, tuple[str, Any]],
                  media_id: str = "") -> dict[str, Any]:
        media_id = media_id or serve.get_multiplexed_model_id()
        seen = bool(media_id) and media_id in self._answered
        if media_id:
            await self._media(media_id)
        if key not in self.stages:
            return await super().run(key, payload)
        inputs = await asyncio.to_thread(self._inputs, payload)
        if seen or not self._batchable(key, inputs):
            return await self._single(key, inputs, media_id)
        _batch_across_media()
        return await self._batched((key, inputs, media_id))

    async def run_streaming(self, key: str, payload: dict[str, tuple[str, Any]],
                            media_id: str = ""):
        """`run` of one call whose caller streams: yields each `TokenEvent` as the VLM generates
        it, then the reply. Never batched (a batch decodes in lockstep for all its callers)."""
        media_id = media_id or serve.get_multiplexed_model_id()
        if media_id:
            await self._media(media_id)
        inputs = await asyncio.to_thread(self._inputs, payload)
        loop, events = asyncio.get_running_loop(), asyncio.Queue()
        with answer_stream(lambda ev: loop.call_soon_threadsafe(events.put_nowait, ev)):
            work = asyncio.ensure_future(self._single(key, inputs, media_id))
        while not (work.done() and events.empty()):
            getter = asyncio.ensure_future(events.get())
            await asyncio.wait({getter, work}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
            else:
                getter.cancel()
        yield await work

    async def _single(self, key: str, inputs: dict[str, Any], media_id: str) -> dict[str, Any]:
        reply = await asyncio.to_thread(self._run_one, key, inputs)
        if media_id and not isinstance(reply["out"], _Failure):
            self._remember(media_id)
        return reply

    @serve.batch(max_batch_size=4, batch_wait_timeout_s=0.01)
    async def _batched(self, calls: list[tuple[str, dict[str, Any], str]]) -> list[dict[str, Any]]:
        groups: dict[str, list[int]] = {}
        for i, (key, _, _) in enumerate(calls):
            groups.setdefault(key, []).append(i)
        replies: list[dict[str, Any] | None] = [None] * len(calls)
        for key, idx in groups.items():
            if len(idx) == 1:  # a batch of one writes the KV cache: the single path
                k, inputs, mid = calls[idx[0]]
                replies[idx[0]] = await self._single(k, inputs, mid)
                continue
            for i, reply in zip(idx, await asyncio.to_thread(
                    self._run_batch, key, [calls[i][1] for i in idx])):
                replies[i] = reply
        return replies

    def _run_batch(self, key: str, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`vlm_answer`'s run for several calls at once, through `VLM.generate_batch`."""
        from ..artifacts import Answer, Evidence
        from ..stages._shared import as_image_list
        from ..stages.vlm_answer import record_bill

        stage = self.stages[key]
        p = stage.params
        declared = stage.model(p.model)
        red = declared.reduction(p.reduction, p.keep_ratio, p.fastv_layer)
        items, requests = [], []
        for inputs in batch:
            ims = as_image_list(inputs["images"])
            hint, q = inputs.get("hint"), inputs["question"]
            items.append(ims)
            requests.append((ims, f"{hint.strip()}\n{q}" if hint and hint.strip() else q))
        t0 = time.perf_counter()
        try:
            with declared.lock:
                results = declared.vlm.generate_batch(requests, max_new_tokens=p.max_new_tokens,
                                                      reduction=red, system_prompt=p.system_prompt)
        except Exception as e:
            seconds = (time.perf_counter() - t0) / len(batch)
            return [self._reply(StageRecord(stage.name, stage.type_name, "failed"), _Failure(e),
                                seconds) for _ in batch]
        seconds = (time.perf_counter() - t0) / len(batch)
        replies = []
        for n, (ims, r) in enumerate(zip(items, results)):
            rec = StageRecord(stage.name, stage.type_name)
            with stage_scope(rec):
                record_bill(r.bill, vlm_batch_size=len(batch))
                out = stage.Outputs(Answer(r.text, "vlm", Evidence(images=tuple(ims)), r.bill),
                                    r.bill.confidence)
            rec.seconds = seconds
            extra = {"batches": 1.0, "batched_calls": float(len(batch))} if n == 0 else {}
            replies.append(self._reply(rec, out, seconds, **extra))
        return replies


def _batch_across_media() -> None:
    """Let this call share a `@serve.batch` with calls about other media. Serve splits a batch
    by `multiplexed_model_id` (one model per batch); here the id is a routing key, not a model,
    and it has done its work once the call is in this replica. Clearing it in this request's
    context (Serve keeps it in a private context variable) keeps the calls in one batch; if that
    variable moves in another Ray version, batches only hold calls about the same media."""
    try:
        from ray.serve import context as serve_context

        ctx = serve_context._get_serve_request_context()
        serve_context._serve_request_context.set(dataclasses.replace(ctx, multiplexed_model_id=""))
    except Exception:  # noqa: BLE001 - a layout change costs batching, never a request
        log.debug("could not clear the multiplexed model id; batching per media", exc_info=True)


# -- the ingress side ----------------------------------------------------------------------------
class RemoteStages:
    """The ingress pipelines' `StageExecutor`: heavy stages' runs go to their deployments."""

    def __init__(self, handles: dict[str, Any], remote_types: tuple[str, ...], retries: int = 2,
                 timeout_s: float = 600.0):
        self.stage_handles, self.remote_types = dict(handles), set(remote_types) & set(handles)
        self.retries, self.timeout_s = retries, timeout_s
        self._keys: dict[int, tuple[Stage, str]] = {}
        # id(value) -> (value, its ObjectRef, bytes): the value is held so its id is not reused
        self._refs: OrderedDict[int, tuple[Any, Any, int]] = OrderedDict()
        self._ref_bytes = 0
        self._media: OrderedDict[str, None] = OrderedDict()  # media ids answered before
        self._lock = threading.Lock()
        self.replica_stats: dict[str, dict[str, dict[str, float]]] = {}  # deployment -> replica -> stats
        self.retried: dict[str, int] = {}
        self.puts = 0

    def handles(self, stage: Stage) -> bool:
        return stage.type_name in self.remote_types

    def key_of(self, stage: Stage) -> str:
        with self._lock:
            hit = self._keys.get(id(stage))
            if hit is not None and hit[0] is stage:
                return hit[1]
        key = stage_key(stage_config(stage))
        with self._lock:
            self._keys[id(stage)] = (stage, key)
        return key

    def _payload(self, inputs: dict[str, Any]) -> dict[str, tuple[str, Any]]:
        """Large inputs as ObjectRefs, one `ray.put` per value for all the hops that read it."""
        import ray

        out = {}
        for port, value in inputs.items():
            if isinstance(value, (str, int, float, bool)) or value is None \
                    or _nbytes(value) < _PUT_MIN_BYTES:
                out[port] = ("value", value)
                continue
            with self._lock:
                hit = self._refs.get(id(value))
                if hit is not None and hit[0] is value:
                    self._refs.move_to_end(id(value))
                    out[port] = ("ref", hit[1])
                    continue
            ref, size = ray.put(value), _nbytes(value)
            with self._lock:
                self.puts += 1
                self._refs[id(value)] = (value, ref, size)
                self._ref_bytes += size
                while len(self._refs) > 1 and (len(self._refs) > 64
                                               or self._ref_bytes > _REF_CACHE_BYTES):
                    self._ref_bytes -= self._refs.popitem(last=False)[1][2]
            out[port] = ("ref", ref)
        return out

    def run(self, stage: Stage, inputs: dict[str, Any]) -> Any:
        from ray.exceptions import RayActorError

        name = stage.type_name
        handle, key = self.stage_handles[name], self.key_of(stage)
        payload, extra, mid = self._payload(inputs), {}, ""
        if name == "vlm_answer" and "images" in inputs:
            mid = extra["media_id"] = media_id(key, inputs["images"])
            with self._lock:
                follow_up = mid in self._media
            if follow_up:  # to the replica that answered about these media (its KV prefix)
                handle = handle.options(multiplexed_model_id=mid)
        on_token = claim_stream(stage.name) if name == "vlm_answer" and getattr(
            stage.params, "stream", False) else None
        if is_silent(on_token):  # nobody reads the tokens: keep the call batchable
            on_token = None
        for attempt in range(self.retries + 1):
            streamed = [0]
            try:
                if on_token is None:
                    reply = handle.run.remote(key, payload, **extra).result(
                        timeout_s=self.timeout_s)
                else:
                    reply = self._stream(handle, key, payload, extra, on_token, streamed)
                break
            except RayActorError as e:  # the replica died (or is unreachable): send it again
                if attempt == self.retries or streamed[0]:
                    raise  # tokens already reached the client: a retry would repeat them
                with self._lock:
                    self.retried[name] = self.retried.get(name, 0) + 1
                record(remote_retries=1)
                log.warning("stage %s: replica lost (%s); retrying", stage.name, type(e).__name__)
        with self._lock:
            self.replica_stats.setdefault(name, {})[reply["replica"]] = reply["stats"]
            if mid:
                self._media[mid] = None
                self._media.move_to_end(mid)
                while len(self._media) > 100_000:
                    self._media.popitem(last=False)
        if reply["counters"]:
            record(**reply["counters"])
        for w in reply["warnings"]:
            warn(w)
        if reply["status"] == "cached":
            mark_cached()
        out = reply["out"]
        if isinstance(out, _Failure):
            raise out.exc
        return out


    @staticmethod
    def _stream(handle: Any, key: str, payload: dict, extra: dict, on_token: Any,
                streamed: list[int]) -> dict[str, Any]:
        """A streaming call: each token goes to `on_token` as the replica yields it (counted in
        `streamed`); the last item is the reply. If `on_token` raises (the client left), the
        remote generation is cancelled."""
        gen = handle.options(stream=True).run_streaming.remote(key, payload, **extra)
        reply = None
        try:
            for item in gen:
                if isinstance(item, dict):
                    reply = item
                else:
                    streamed[0] += 1
                    on_token(item)
        except BaseException:
            gen.cancel()
            raise
        if reply is None:
            raise CascadeError("the VLM replica's stream ended without a reply")
        return reply


def _nbytes(value: Any) -> int:
    try:
        return nbytes_of(value)
    except Exception:
        return 0


def media_id(key: str, images: Any) -> str:
    """The affinity id of a VLM call: its stage configuration and its images' content."""
    from ..stages._shared import as_image_list

    return content_hash([key, [im.__content_hash__() for im in as_image_list(images)]])[:24]


class _Unlocked(contextlib.nullcontext):
    """Stands in for a served pipeline's run lock in the ingress: its heavy stages (the reason
    for the lock: loaded models, the VLM's caches) run in replicas, and the light stages keep no
    per-run state on the stage object, so the ingress runs up to --max-concurrent requests of a
    pipeline at once (the replicas' `max_ongoing_requests` and `@serve.batch` take it from there)."""


class _ContextCancel:
    """`Engine`'s cancel hook with one event per request instead of one per pipeline (runs of a
    pipeline overlap in the ingress): the event lives in a context variable, which the runner's
    worker threads inherit."""

    def __init__(self) -> None:
        self._var: contextvars.ContextVar[threading.Event | None] = \
            contextvars.ContextVar("cascade_cancel", default=None)

    @property
    def event(self) -> threading.Event | None:
        return self._var.get()

    @event.setter
    def event(self, value: threading.Event | None) -> None:
        self._var.set(value)

    def before_stage(self, record: StageRecord) -> None:
        from .engine import RequestCancelled

        ev = self._var.get()
        if ev is not None and ev.is_set():
            raise RequestCancelled(f"cancelled before stage '{record.name}'")

    def after_stage(self, record: StageRecord) -> None:
        pass


def _served_stages(config: ServeConfig) -> dict[str, dict[str, dict[str, Any]]]:
    """Heavy stage type -> configuration key -> configuration, over every served pipeline
    (loads the pipelines as the ingress will: validation only, no weights)."""
    from .engine import Engine

    engine = Engine(config)
    try:
        found: dict[str, dict[str, dict[str, Any]]] = {}
        for served in engine.models.values():
            for st in served.qa.pipeline.stages.values():
                cfg = stage_config(st)
                found.setdefault(st.type_name, {})[stage_key(cfg)] = cfg
        return found
    finally:
        engine.close()


class Ingress:
    """The HTTP ingress: `create_app` over an `Engine` whose heavy stages run remotely."""

    def __init__(self, args: dict[str, Any], handles: dict[str, Any]):
        from .engine import Engine

        config, options = split_args(args)
        _prepare_process(options)
        config = dataclasses.replace(config, workers=max(config.workers, config.max_concurrent))
        self.options = options
        self.engine = Engine(config, load_models=False)  # the heavy stages load in replicas
        self.remote = RemoteStages(handles, options.remote_stages, options.retries,
                                   options.call_timeout_s)
        for served in self.engine.models.values():
            pipeline = served.qa.pipeline
            pipeline.executor = self.remote
            cancel = _ContextCancel()
            pipeline.hooks[pipeline.hooks.index(served.cancel)] = cancel
            served.cancel, served.lock = cancel, _Unlocked()
        self._status: tuple[float, dict[str, int]] = (0.0, {})
        self.engine.readiness.probes.append(self.replica_probe)
        self.engine.metrics.add_collector(_ReplicaMetrics(self))
        self._warm()

    def _warm(self) -> None:
        """Read the declared models' families (config and processor, no weights) now: the light
        stages price images with them, and concurrent first imports of transformers race."""
        for served in self.engine.models.values():
            for declared in served.qa.pipeline.models.values():
                try:
                    declared.family
                except CascadeError as e:  # the stage that needs it reports it per request
                    log.warning("model '%s': %s", declared.name, e)

    def replicas(self) -> dict[str, int]:
        """Running replicas per deployment of this application (`serve.status()`, 0.5 s cache)."""
        t, counts = self._status
        if time.monotonic() - t < 0.5:
            return counts
        app = serve.get_replica_context().app_name
        status = serve.status().applications.get(app)
        counts = {} if status is None else {
            name: int(d.replica_states.get("RUNNING", 0)) for name, d in status.deployments.items()}
        self._status = (time.monotonic(), counts)
        return counts

    def replica_probe(self) -> tuple[dict[str, Any], list[str]]:
        """Readiness: every deployment the served pipelines call has a running replica."""
        counts = self.replicas()
        waiting = [f"deployment '{d}': no running replica" for d in sorted(self.remote.remote_types)
                   if counts.get(d, 0) < 1]
        return {"replicas": counts}, waiting

    def __serve_build_asgi_app__(self):
        from .app import create_app

        return create_app(self.engine.config, engine=self.engine)


class _ReplicaMetrics(Collector):
    """The deployments' figures, read when /metrics is scraped: running replicas, the replicas'
    counters summed (each replica's latest cumulative report; a replaced replica's last report
    stays in the sum), calls per replica, retries after a replica died, object-store puts."""

    def __init__(self, ingress: Ingress):
        self.ingress = ingress

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        replicas = GaugeMetricFamily("cascade_deployment_replicas", "Running replicas per Ray "
                                     "Serve deployment.", labels=["deployment"])
        for d, n in sorted(self.ingress.replicas().items()):
            replicas.add_metric([d], n)
        yield replicas
        remote = self.ingress.remote
        with remote._lock:
            stats = {d: dict(r) for d, r in remote.replica_stats.items()}
            retried, puts = dict(remote.retried), remote.puts
        for k in sorted({k for reps in stats.values() for s in reps.values() for k in s}):
            family = CounterMetricFamily(f"cascade_deployment_{k}", f"Replicas' "
                                         f"{k.replace('_', ' ')} (summed over replicas).",
                                         labels=["deployment"])
            for d, reps in sorted(stats.items()):
                family.add_metric([d], sum(s.get(k, 0) for s in reps.values()))
            yield family
        calls = CounterMetricFamily("cascade_replica_calls", "Stage calls each replica answered "
                                    "(a replaced replica keeps its last count).",
                                    labels=["deployment", "replica"])
        for d, reps in sorted(stats.items()):
            for rid, s in sorted(reps.items()):
                calls.add_metric([d, rid], s.get("calls", 0))
        yield calls
        retries = CounterMetricFamily("cascade_remote_retries", "Stage calls sent again after "
                                      "their replica died.", labels=["deployment"])
        for d, n in sorted(retried.items()):
            retries.add_metric([d], n)
        yield retries
        yield CounterMetricFamily("cascade_object_puts", "Inputs put in the Ray object store (one "
                                  "per value, whatever the hops).", value=puts)


def build_app(args: dict[str, Any] | None = None):
    """The Serve application for `args` (`app_args`; in a Serve config, the `args:` mapping):
    the ingress and one deployment per heavy stage type the served pipelines use. Deployment
    names: `ingress` and the stage type names (`vlm_answer`, `ocr`, ...), which a Serve config's
    `deployments:` entries override (replicas, autoscaling, resources)."""
    config, options = split_args(args)
    for mod in options.imports:
        importlib.import_module(mod)
    found = _served_stages(config)
    opts = {k: v for k, v in app_args(config, options).items() if k in _OPTION_FIELDS}
    health = ({} if options.health_check_period_s is None
              else {"health_check_period_s": options.health_check_period_s})
    handles = {}
    for stage_type in options.remote_stages:
        if stage_type not in found:
            continue
        cls = VLMReplica if stage_type == "vlm_answer" else StageReplica
        dep = serve.deployment(cls).options(
            name=stage_type, num_replicas=options.replicas_of(stage_type),
            max_ongoing_requests=max(8, 2 * options.max_batch_size), **health,
            ray_actor_options={"num_cpus": options.cpus(stage_type),
                               "num_gpus": options.gpus(stage_type)})
        handles[stage_type] = dep.bind(stage_type, found[stage_type], opts, config.random_weights)
    ingress = serve.deployment(serve.ingress()(Ingress)).options(
        name="ingress", num_replicas=1, max_ongoing_requests=max(16, 2 * config.max_concurrent
                                                                 + config.max_queue), **health,
        ray_actor_options={"num_cpus": options.cpus("ingress"), "num_gpus": 0})
    return ingress.bind(app_args(config, options), handles)
