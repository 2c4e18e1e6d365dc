"""One deployment per heavy stage type: its replicas build, set up and run that type's stages.

Each replica builds every configuration of its stage type the served pipelines use and sets it up
(loads its model) before it reports running. `run(key, payload)` runs one stage call and returns
its outputs with the counters and warnings it recorded, so the ingress's trace is the trace an
in-process run writes; a stage's exception comes back as itself (a client mistake is still a 400).
What the stage type declares (`Stage.serving`) decides the rest:

- affinity: a call carries an affinity id (the ingress hashes the declared input's content with
  the stage configuration), which the replica registers through `@serve.multiplexed`; a later
  call with that id is routed here by Serve, where the stage's caches hold that content (the
  VLM's KV prefix). A call whose id this replica has answered runs alone (`run`: the cache path).
- batching: `@serve.batch` gathers concurrent calls; two or more `batchable` calls of one
  configuration go to the stage's `run_batch` together, a batch of one to `run`.
- per-request params: a call may carry params for this call only (a request's
  `mm_processor_kwargs`); it runs alone under `cascade.stage.run_params`, never in a batch.
- streaming: `run_streaming` is `run` for a call whose caller streams: it yields each token as
  the stage generates it (through `cascade.streaming.TokenChannel`), then the reply. Never batched.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import threading
import time
from collections.abc import AsyncIterator
from typing import Any, cast

from ray import serve

from ...cache import LRUCache
from ...errors import CascadeError
from ...registry import get_stage_class
from ...stage import run_params
from ...streaming import TokenChannel, answer_stream
from ...trace import StageRecord, stage_scope
from .configs import Failure, build_stage, prepare_process
from .options import RayOptions
from .roles import install_roles

__all__ = ["StageReplica"]

log = logging.getLogger("cascade.serve.ray")
_AFFINITY_IDS = 4096  # affinity ids a replica remembers having answered


def _replica_id() -> str:
    try:
        return serve.get_replica_context().replica_id.unique_id
    except Exception:  # outside Serve (unit use)
        return f"pid{os.getpid()}"


class StageReplica:
    """One replica of a heavy stage type: every configuration the pipelines use, set up."""

    def __init__(
        self,
        stage_type: str,
        configs: dict[str, dict[str, Any]],
        options: dict[str, Any] | None = None,
        tiny: bool = False,
        roles: dict[str, dict[str, Any]] | None = None,
    ):
        self.options = RayOptions(**(options or {}))
        prepare_process(self.options)
        self.stage_type = stage_type
        self.serving = get_stage_class(stage_type).serving
        self.stages = {key: build_stage(cfg, tiny) for key, cfg in configs.items()}
        for st in self.stages.values():
            st.ensure_setup()  # load before the replica reports running
        install_roles(configs, self.stages, roles or {})  # a disaggregated model's decode side
        self.replica = _replica_id()
        self._lock = threading.Lock()
        self.stats: dict[str, float] = {"calls": 0, "errors": 0, "busy_seconds": 0.0}
        self._answered = LRUCache(_AFFINITY_IDS, size_of=lambda _: 1)
        if self.serving.batch:
            # Ray types @serve.batch's method as a plain callable; it has these setters
            self._batched.set_max_batch_size(self.options.max_batch_size)  # type: ignore[attr-defined]
            self._batched.set_batch_wait_timeout_s(self.options.batch_wait_timeout_s)  # type: ignore[attr-defined]

    # -- one call ---------------------------------------------------------------------------
    def _count(self, **delta: float) -> dict[str, float]:
        with self._lock:
            for k, v in delta.items():
                self.stats[k] = self.stats.get(k, 0) + v
            return dict(self.stats)

    def _inputs(self, payload: dict[str, tuple[str, Any]]) -> dict[str, Any]:
        import ray

        return {port: ray.get(v) if how == "ref" else v for port, (how, v) in payload.items()}

    def _reply(self, rec: StageRecord, out: Any, seconds: float, **extra: float) -> dict[str, Any]:
        failed = isinstance(out, Failure)
        stats = self._count(calls=1, errors=int(failed), busy_seconds=seconds, **extra)
        return {
            "out": out,
            "counters": dict(rec.counters),
            "warnings": list(rec.warnings),
            "status": rec.status,
            "replica": self.replica,
            "stats": stats,
        }

    def _run_one(
        self, key: str, inputs: dict[str, Any], params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        stage = self.stages[key]
        rec, t0 = StageRecord(stage.name, stage.type_name), time.perf_counter()
        try:
            given = {} if params is None else {stage: stage.Params.model_validate(params)}
            with stage_scope(rec), run_params(given):
                out = stage.run(**inputs)
        except Exception as e:
            out = Failure(e)
        return self._reply(rec, out, time.perf_counter() - t0)

    def _unknown(self, key: str) -> dict[str, Any]:
        return {
            "out": Failure(
                CascadeError(
                    f"deployment '{self.stage_type}' has no stage "
                    f"configuration {key}; redeploy the application"
                )
            ),
            "counters": {},
            "warnings": [],
            "status": "failed",
            "replica": self.replica,
            "stats": self._count(calls=1, errors=1),
        }

    async def _single(
        self,
        key: str,
        inputs: dict[str, Any],
        affinity: str,
        params: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        reply = await asyncio.to_thread(self._run_one, key, inputs, params)
        if affinity and not isinstance(reply["out"], Failure):
            self._answered.put(affinity, True)
        return reply

    @serve.multiplexed(max_num_models_per_replica=256)
    async def _register(self, affinity: str) -> str:
        """Nothing to load: registering the id is what routes later calls with it here."""
        return affinity

    async def _arrive(
        self, key: str, payload: dict[str, tuple[str, Any]], affinity: str
    ) -> tuple[str, dict[str, Any]]:
        affinity = affinity or serve.get_multiplexed_model_id()
        if affinity:
            await self._register(affinity)
        return affinity, await asyncio.to_thread(self._inputs, payload)

    # -- the deployment's methods -------------------------------------------------------------
    async def run(
        self,
        key: str,
        payload: dict[str, tuple[str, Any]],
        affinity: str = "",
        params: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One stage call; `params`: the stage's params for this call only (None: its own)."""
        if key not in self.stages:
            return self._unknown(key)
        affinity, inputs = await self._arrive(key, payload, affinity)
        seen = bool(affinity) and self._answered.get(affinity) is not None
        alone = seen or params is not None or not self.serving.batch
        if alone or not self.stages[key].batchable(inputs):
            return await self._single(key, inputs, affinity, params)
        _batch_across_affinity()
        return await self._batched((key, inputs, affinity))

    async def run_streaming(
        self,
        key: str,
        payload: dict[str, tuple[str, Any]],
        affinity: str = "",
        params: dict[str, Any] | None = None,
    ) -> AsyncIterator[Any]:
        """`run` of one call whose caller streams: yields each token as the stage generates it,
        then the reply. Never batched (a batch decodes in lockstep for all its callers)."""
        if key not in self.stages:
            yield self._unknown(key)
            return
        affinity, inputs = await self._arrive(key, payload, affinity)
        tokens = TokenChannel()
        with answer_stream(tokens.put):  # the call's task (and its thread) inherit the stream
            work = asyncio.ensure_future(self._single(key, inputs, affinity, params))
        work.add_done_callback(lambda _: tokens.close())
        async for event in tokens:
            yield event
        yield await work

    async def info(self) -> dict[str, Any]:
        return {"replica": self.replica, "pid": os.getpid(), "stats": self._count()}

    # -- batches ------------------------------------------------------------------------------
    @serve.batch(max_batch_size=4, batch_wait_timeout_s=0.01)
    async def _batched(self, calls: list[tuple[str, dict[str, Any], str]]) -> list[dict[str, Any]]:
        groups: dict[str, list[int]] = {}
        for i, (key, _, _) in enumerate(calls):
            groups.setdefault(key, []).append(i)
        replies: list[dict[str, Any] | None] = [None] * len(calls)
        for key, idx in groups.items():
            if len(idx) == 1:  # a batch of one takes the single path (the stage's caches)
                k, inputs, affinity = calls[idx[0]]
                replies[idx[0]] = await self._single(k, inputs, affinity)
                continue
            for i, reply in zip(
                idx,
                await asyncio.to_thread(self._run_batch, key, [calls[i][1] for i in idx]),
                strict=True,
            ):
                replies[i] = reply
        return cast("list[dict[str, Any]]", replies)  # every call is in a group: all set

    def _run_batch(self, key: str, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The stage's `run_batch` over several calls; each call's record holds what the stage
        recorded before yielding its outputs."""
        stage = self.stages[key]
        records = [StageRecord(stage.name, stage.type_name) for _ in batch]
        t0, outs = time.perf_counter(), []
        try:
            items = iter(stage.run_batch(batch))
            for rec in records:
                with stage_scope(rec):
                    outs.append(next(items, None))
            if any(out is None for out in outs):
                raise CascadeError(
                    f"stage '{stage.name}': run_batch yielded fewer outputs "
                    f"than the {len(batch)} calls"
                )
        except Exception as e:
            seconds = (time.perf_counter() - t0) / len(batch)
            return [
                self._reply(StageRecord(stage.name, stage.type_name, "failed"), Failure(e), seconds)
                for _ in batch
            ]
        seconds = (time.perf_counter() - t0) / len(batch)
        replies = []
        for n, (rec, out) in enumerate(zip(records, outs, strict=True)):
            rec.seconds = seconds
            extra = {"batches": 1.0, "batched_calls": float(len(batch))} if n == 0 else {}
            replies.append(self._reply(rec, out, seconds, **extra))
        return replies


def _batch_across_affinity() -> None:
    """Let this call share a `@serve.batch` with calls of other affinity ids. Serve splits a
    batch by `multiplexed_model_id` (one model per batch); here the id is a routing key, not a
    model, and it has done its work once the call is in this replica. Clearing it in this
    request's context (Serve keeps it in a private context variable) keeps the calls in one
    batch; if that variable moves in another Ray version, batches only hold calls of one id."""
    try:
        from ray.serve import context as serve_context

        ctx = serve_context._get_serve_request_context()
        cleared = dataclasses.replace(ctx, multiplexed_model_id="")
        serve_context._serve_request_context.set(cleared)  # type: ignore[arg-type]  # Ray: ContextVar[None]
    except Exception:  # noqa: BLE001 - a layout change costs batching, never a request
        log.debug("could not clear the multiplexed model id; batching per id", exc_info=True)
