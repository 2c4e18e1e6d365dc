"""Execute a pipeline: dependency-driven, independent branches concurrently, routers honoured.

Each stage becomes an asyncio task that waits for the stages it depends on, then runs in a worker
thread (stages are synchronous compute; torch, numpy, PyAV and onnxruntime release the GIL). A stage
is skipped when it waits on a branch its router did not take, or when a required input comes only
from skipped stages; a list of references takes the first that ran, which is how a coarse and a fine
path join. A reference that ran but produced None (a tool that could not answer) also falls
through to the next one.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .artifacts import Route
from .errors import StageError
from .spec import flatten_refs, parse_ref
from .stage import Router
from .trace import StageRecord, Trace, stage_scope

if TYPE_CHECKING:
    from .pipeline import Pipeline

_MISSING = object()


@dataclass
class PipelineResult:
    """The outputs a pipeline declared (None for one whose stages were all skipped) and its trace."""

    outputs: dict[str, Any]
    trace: Trace

    def __getitem__(self, key: str) -> Any:
        return self.outputs[key]

    def to_dict(self) -> dict[str, Any]:
        from .serialize import to_jsonable

        return {"outputs": to_jsonable(self.outputs), "trace": self.trace.to_dict()}


async def execute(pipeline: "Pipeline", inputs: dict[str, Any]) -> PipelineResult:
    spec = pipeline.spec
    trace = Trace(spec.name)
    records = {n: StageRecord(n, s.type) for n, s in spec.stages.items()}
    outputs: dict[str, Any] = {}  # stage name -> its Outputs dataclass (only if it ran)
    done = {n: asyncio.Event() for n in spec.stages}
    finished: list[str] = []

    def lookup(ref: str) -> Any:
        src, port = parse_ref(ref)
        if src is None:
            value = inputs[port]
        else:
            value = getattr(outputs[src], port) if src in outputs else _MISSING
        return _MISSING if value is None else value

    async def run_stage(name: str) -> None:
        for dep in pipeline.graph.deps[name]:
            await done[dep].wait()
        st, rec, stage_obj = spec.stages[name], records[name], pipeline.stages[name]
        try:
            reason = _skip_reason(st.when, outputs, records)
            kwargs: dict[str, Any] = {}
            ports = stage_obj.input_ports()
            for port, ref in st.inputs.items():
                value = next((v for r in flatten_refs([ref]) if (v := lookup(r)) is not _MISSING), _MISSING)
                if value is not _MISSING:
                    kwargs[port] = value
                elif ports[port].required and not reason:
                    reason = f"input '{port}' has no value: {ref} was skipped or empty"
            if reason:
                rec.status, rec.detail = "skipped", reason
                return
            for hook in pipeline.hooks:
                hook.before_stage(rec)
            out = await asyncio.to_thread(_call, stage_obj, rec, kwargs)
            outputs[name] = out
            if isinstance(stage_obj, Router):
                rec.detail = f"branch={out.route.branch}: {out.route.reason}".rstrip(": ")
        finally:
            finished.append(name)
            for hook in pipeline.hooks:
                hook.after_stage(rec)
            done[name].set()

    t0 = time.perf_counter()
    tasks = [asyncio.create_task(run_stage(n)) for n in pipeline.graph.topological_order()]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        trace.seconds = time.perf_counter() - t0
        trace.stages = [records[n] for n in finished] + \
            [records[n] for n in spec.stages if n not in finished]

    result = {}
    for out_name, ref in spec.outputs.items():
        value = next((v for r in flatten_refs([ref]) if (v := lookup(r)) is not _MISSING), None)
        result[out_name] = value
    return PipelineResult(result, trace)


def _skip_reason(when: str | None, outputs: dict[str, Any], records: dict[str, StageRecord]) -> str:
    if not when:
        return ""
    router, _, branch = when.partition(".")
    if router not in outputs:
        return f"router '{router}' did not run"
    taken = outputs[router].route.branch
    return "" if taken == branch else f"branch '{branch}' not taken (router '{router}' chose '{taken}')"


def _call(stage_obj, rec: StageRecord, kwargs: dict[str, Any]) -> Any:
    """Set up (timed separately), run, and check one stage; all failures become StageError."""
    try:
        if not stage_obj._is_setup:
            t0 = time.perf_counter()
            stage_obj.ensure_setup()
            if (setup_s := time.perf_counter() - t0) > 1e-3:  # only model loads are worth a line
                rec.counters["setup_seconds"] = round(setup_s, 6)
        with stage_scope(rec):
            out = stage_obj.run(**kwargs)
        expected = stage_obj._hints()["return"]
        if not isinstance(out, expected):
            raise TypeError(f"run() returned {type(out).__name__}, expected {expected.__name__}")
        if isinstance(stage_obj, Router):
            route = out.route
            if not isinstance(route, Route) or route.branch not in stage_obj.branches:
                raise ValueError(f"router chose {getattr(route, 'branch', route)!r}, expected one of "
                                 f"{', '.join(stage_obj.branches)}")
        return out
    except StageError:
        rec.status = "failed"
        raise
    except Exception as e:
        rec.status = "failed"
        rec.detail = f"{type(e).__name__}: {e}"
        raise StageError(rec.name, rec.type, e) from e


__all__ = ["execute", "PipelineResult"]
