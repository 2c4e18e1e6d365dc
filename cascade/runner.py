"""Execute a pipeline: dependency-driven, independent branches concurrently, routers honoured.

A `graphlib.TopologicalSorter` hands out the stages whose dependencies are done. When exactly one
is ready and none is running, it runs right here in the calling thread (a chain of stages pays no
thread hand-off); otherwise the ready stages go to one process-wide thread pool and run
concurrently (stages are synchronous compute: torch, numpy, PyAV and onnxruntime release the GIL).
No event loop is created per run, so the engine's own overhead stays a few tens of microseconds
per stage (`benchmarks/engine_overhead.py`).

A stage's one-time `setup()` (model loading) never overlaps another stage's run: loading a model
often changes process-wide library state (ultralytics sets OpenCV's thread count when imported,
which crashes an OpenCV call running in another thread), so it waits for the runs in flight and
holds new ones back until it is done (`_SetupGate`). A stage that runs another pipeline inside
its own run should set that pipeline up first (`Pipeline.setup()`).

A stage is skipped when it waits on a branch its router did not take, or when a required input
comes only from skipped stages; a list of references takes the first that ran, which is how a
coarse and a fine path join. A reference that ran but produced None (a tool that could not
answer) also falls through to the next one.

The runner executes a `Plan` (the stages, how their inputs are wired, the outputs and the
dependency graph), which `cascade.pipeline` builds from a validated YAML; it knows nothing of
loading or validation. A run may carry an `executor` (`StageExecutor`): the stages it `handles`
run through its `run(stage, inputs)` instead of in this process (no local setup, no setup gate: a
Ray Serve replica holds the loaded stage, `cascade.serve.ray`); everything else (skipping, joins,
records, output checks) is the same.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .artifacts import Route
from .errors import StageError
from .graph import Graph
from .spec import Ref, flatten_refs, parse_ref
from .stage import Router, Stage
from .trace import StageHook, StageRecord, Trace, stage_scope

__all__ = ["execute", "Plan", "Step", "PipelineResult", "StageExecutor"]

_MISSING = object()
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """The process-wide pool concurrent stages run in (created once, on first need). Sized for
    stages that wait on each other across nested pipelines, not for CPU count."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(
                max_workers=max(32, 4 * (os.cpu_count() or 1)), thread_name_prefix="cascade-stage"
            )
        return _POOL


class _SetupGate:
    """Stage runs share the gate; a stage's setup holds it alone (runs on the setting-up thread's
    own stack excepted, so a stage may set up what it runs inline)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running = 0
        self._setting_up = False
        self._mine = threading.local()

    @contextmanager
    def run(self) -> Iterator[None]:
        with self._cond:
            while self._setting_up:
                self._cond.wait()
            self._running += 1
        self._mine.runs = getattr(self._mine, "runs", 0) + 1
        try:
            yield
        finally:
            self._mine.runs -= 1
            with self._cond:
                self._running -= 1
                self._cond.notify_all()

    @contextmanager
    def setup(self) -> Iterator[None]:
        mine = getattr(self._mine, "runs", 0)
        with self._cond:
            while self._setting_up or self._running > mine:
                self._cond.wait()
            self._setting_up = True
        try:
            yield
        finally:
            with self._cond:
                self._setting_up = False
                self._cond.notify_all()


_GATE = _SetupGate()


def setup_stage(stage_obj: Stage) -> None:
    """Set a stage up now (once), under the gate stage runs share: never beside another stage's
    setup or run. A server loads its models in a background thread while requests run; two
    setups at once raced in transformers' lazy imports ("cannot import name
    'AutoModelForImageTextToText'") and failed the request."""
    with _GATE.setup():
        stage_obj.ensure_setup()


@runtime_checkable
class StageExecutor(Protocol):
    """Runs some stages' `run` elsewhere (`Pipeline.executor`). `run` is called inside the
    stage's record scope, so `cascade.trace.record` / `warn` land in this run's trace; it
    returns the stage's Outputs or raises what the stage raised."""

    def handles(self, stage: Stage) -> bool: ...

    def run(self, stage: Stage, inputs: dict[str, Any]) -> Any: ...


@dataclass(frozen=True)
class Step:
    """One stage of a plan: the stage, where each input comes from (`$input`, `stage.port`, or a
    list: the first that ran with a value) and the `router.branch` it runs on (None: always)."""

    stage: Stage
    inputs: Mapping[str, Ref]
    when: str | None = None


@dataclass(frozen=True)
class Plan:
    """What `execute` runs: named steps, the outputs' references and the dependency graph."""

    name: str
    steps: Mapping[str, Step]
    outputs: Mapping[str, Ref]
    graph: Graph


@dataclass
class PipelineResult:
    """The outputs a pipeline declared (None for one whose stages were all skipped) and its
    trace."""

    outputs: dict[str, Any]
    trace: Trace

    def __getitem__(self, key: str) -> Any:
        return self.outputs[key]

    def to_dict(self) -> dict[str, Any]:
        """The outputs and the trace as JSON-friendly values (`cascade run --json`)."""
        from .serialize import to_jsonable

        return {"outputs": to_jsonable(self.outputs), "trace": self.trace.to_dict()}


def execute(
    plan: Plan,
    inputs: dict[str, Any],
    *,
    hooks: Sequence[StageHook] = (),
    executor: StageExecutor | None = None,
) -> PipelineResult:
    """Run every step once its dependencies are done; returns the outputs and the trace.
    hooks observe every stage (`cascade.trace.StageHook`); executor runs the stages it handles."""
    steps = plan.steps
    trace = Trace(plan.name)
    records = {n: StageRecord(n, s.stage.type_name) for n, s in steps.items()}
    outputs: dict[str, Any] = {}  # stage name -> its Outputs dataclass (only if it ran)
    finished: list[str] = []

    def lookup(ref: str) -> Any:
        src, port = parse_ref(ref)
        if src is None:
            value = inputs[port]
        else:
            value = getattr(outputs[src], port) if src in outputs else _MISSING
        return _MISSING if value is None else value

    def prepare(name: str) -> dict[str, Any] | None:
        """The stage's inputs, or None when it is skipped (its record says why)."""
        step, rec = steps[name], records[name]
        reason = _skip_reason(step.when, outputs)
        kwargs: dict[str, Any] = {}
        ports = step.stage.input_ports()
        for port, ref in step.inputs.items():
            value = next(
                (v for r in flatten_refs([ref]) if (v := lookup(r)) is not _MISSING), _MISSING
            )
            if value is not _MISSING:
                kwargs[port] = value
            elif ports[port].required and not reason:
                reason = f"input '{port}' has no value: {ref} was skipped or empty"
        if reason:
            rec.status, rec.detail = "skipped", reason
            return None
        return kwargs

    def run_stage(name: str, kwargs: dict[str, Any]) -> None:
        rec, stage_obj = records[name], steps[name].stage
        for hook in hooks:
            hook.before_stage(rec)
        out = _call(stage_obj, rec, kwargs, executor)
        outputs[name] = out
        if isinstance(stage_obj, Router):
            rec.detail = f"branch={out.route.branch}: {out.route.reason}".rstrip(": ")

    def finish(name: str) -> None:
        finished.append(name)
        for hook in hooks:
            hook.after_stage(records[name])

    order = plan.graph.sorter()
    order.prepare()
    running: dict[Future, str] = {}
    ready: list[str] = []
    t0, cpu0 = time.perf_counter(), time.process_time()
    try:
        while order.is_active():
            ready += order.get_ready()
            while ready:
                name = ready.pop(0)
                kwargs = prepare(name)
                if kwargs is None:  # skipped: done at once, its dependents may be ready now
                    finish(name)
                    order.done(name)
                    ready += order.get_ready()
                elif not running and not ready:  # alone: run it here, no thread hand-off
                    try:
                        run_stage(name, kwargs)
                    finally:
                        finish(name)
                    order.done(name)
                    ready += order.get_ready()
                else:
                    ctx = contextvars.copy_context()
                    running[_pool().submit(ctx.run, run_stage, name, kwargs)] = name
            if not running:
                continue
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                name = running.pop(fut)
                finish(name)
                fut.result()  # re-raises the stage's StageError
                order.done(name)
    except BaseException:
        # Let what is running finish (threads cannot be killed), then report the first error.
        wait(running)
        for name in running.values():
            finish(name)
        raise
    finally:
        trace.seconds = time.perf_counter() - t0
        trace.cpu_seconds = time.process_time() - cpu0
        trace.stages = [records[n] for n in finished] + [
            records[n] for n in steps if n not in finished
        ]

    result = {}
    for out_name, ref in plan.outputs.items():
        value = next((v for r in flatten_refs([ref]) if (v := lookup(r)) is not _MISSING), None)
        result[out_name] = value
    return PipelineResult(result, trace)


def _skip_reason(when: str | None, outputs: dict[str, Any]) -> str:
    if not when:
        return ""
    router, _, branch = when.partition(".")
    if router not in outputs:
        return f"router '{router}' did not run"
    taken = outputs[router].route.branch
    return (
        ""
        if taken == branch
        else f"branch '{branch}' not taken (router '{router}' chose '{taken}')"
    )


def _call(
    stage_obj, rec: StageRecord, kwargs: dict[str, Any], executor: StageExecutor | None = None
) -> Any:
    """Set up (timed separately), run, and check one stage; all failures become StageError."""
    try:
        if executor is not None and executor.handles(stage_obj):
            with stage_scope(rec):
                out = executor.run(stage_obj, kwargs)
            return _checked(stage_obj, out)
        if not stage_obj._is_setup:
            if type(stage_obj).setup is Stage.setup:  # nothing to load
                stage_obj.ensure_setup()
                setup_s = 0.0
            else:
                with _GATE.setup():
                    t0 = time.perf_counter()
                    stage_obj.ensure_setup()
                    setup_s = time.perf_counter() - t0
            if setup_s > 1e-3:  # only model loads are worth a line
                rec.counters["setup_seconds"] = round(setup_s, 6)
        with _GATE.run(), stage_scope(rec):
            out = stage_obj.run(**kwargs)
        return _checked(stage_obj, out)
    except StageError:
        rec.status = "failed"
        raise
    except Exception as e:
        rec.status = "failed"
        rec.detail = f"{type(e).__name__}: {e}"
        raise StageError(rec.name, rec.type, e) from e


def _checked(stage_obj, out: Any) -> Any:
    """`out` if it is what the stage declares (its Outputs; a router's branch is one of its own)."""
    expected = stage_obj._hints()["return"]
    if not isinstance(out, expected):
        raise TypeError(f"run() returned {type(out).__name__}, expected {expected.__name__}")
    if isinstance(stage_obj, Router):
        route = out.route
        if not isinstance(route, Route) or route.branch not in stage_obj.branches:
            raise ValueError(
                f"router chose {getattr(route, 'branch', route)!r}, expected one of "
                f"{', '.join(stage_obj.branches)}"
            )
    return out
