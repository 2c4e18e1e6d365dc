"""Per-run tracing: every stage's status, seconds and counters, attached to every result.

Stages add counters with `record(visual_tokens=..., prefill_flops=...)` from inside `run`; the
runner sets which stage is current through a context variable, so this works from worker threads
and concurrent branches without passing a context object through every signature.
"""

from __future__ import annotations

import contextvars
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Status = Literal["pending", "ran", "skipped", "cached", "failed"]


@dataclass
class StageRecord:
    """What one stage did in one run."""

    name: str
    type: str
    status: Status = "pending"  # still "pending" in a trace if the run failed before it
    seconds: float = 0.0
    # this process's CPU seconds while the stage ran (every thread: the decode loop's too; stages
    # running at the same time share them). With one compute thread on a CPU it equals `seconds`
    # on an idle machine, and unlike `seconds` it does not grow when other jobs share the cores.
    cpu_seconds: float = 0.0
    counters: dict[str, float] = field(default_factory=dict)
    detail: str = ""  # why it was skipped, the branch a router took, or the error
    warnings: list[str] = field(default_factory=list)  # e.g. "video truncated: ..." (see `warn`)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "name": self.name,
            "type": self.type,
            "status": self.status,
            "seconds": round(self.seconds, 6),
            "cpu_seconds": round(self.cpu_seconds, 6),
            "counters": dict(self.counters),
            "detail": self.detail,
            "warnings": list(self.warnings),
        }


@dataclass
class Trace:
    """The record of one pipeline run: stages in execution order plus totals."""

    pipeline: str
    stages: list[StageRecord] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # this process's CPU seconds over the run (see StageRecord)

    def __getitem__(self, name: str) -> StageRecord:
        for rec in self.stages:
            if rec.name == name:
                return rec
        raise KeyError(f"no stage '{name}' in trace of '{self.pipeline}'")

    @property
    def counters(self) -> dict[str, float]:
        """Counters summed over all stages."""
        total: dict[str, float] = {}
        for rec in self.stages:
            for k, v in rec.counters.items():
                total[k] = total.get(k, 0) + v
        return total

    @property
    def warnings(self) -> list[str]:
        """Every stage's warnings, prefixed with the stage name, in execution order."""
        return [f"{rec.name}: {w}" for rec in self.stages for w in rec.warnings]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form: the run's seconds, counters, warnings and every stage's record."""
        return {
            "pipeline": self.pipeline,
            "seconds": round(self.seconds, 6),
            "cpu_seconds": round(self.cpu_seconds, 6),
            "counters": self.counters,
            "warnings": self.warnings,
            "stages": [r.to_dict() for r in self.stages],
        }


@runtime_checkable
class StageHook(Protocol):
    """Observes every stage of a run, e.g. for metrics or logging (`Pipeline.hooks`).

    `before_stage` is called when a stage is about to run (not for skipped stages);
    `after_stage` for every stage once its record is final: ran, cached, skipped or failed.
    Hooks run in the stage's worker thread; an exception in a hook fails the run.
    """

    def before_stage(self, record: StageRecord) -> None:
        """Called when a stage is about to run."""

    def after_stage(self, record: StageRecord) -> None:
        """Called once a stage's record is final."""


_current: contextvars.ContextVar[StageRecord | None] = contextvars.ContextVar(
    "cascade_stage", default=None
)


def current_stage() -> StageRecord | None:
    """The record of the stage running in this context (None outside a pipeline run)."""
    return _current.get()


def record(**counters: float) -> None:
    """Add counters to the stage that is running (no-op outside a pipeline run)."""
    rec = _current.get()
    if rec is None:
        return
    for k, v in counters.items():
        rec.counters[k] = rec.counters.get(k, 0) + v


def warn(message: str) -> None:
    """Note something the answer's reader should know (the run still succeeds): added to the
    running stage's record, and logged (outside a pipeline run it is only logged)."""
    logging.getLogger("cascade").warning(message)
    rec = _current.get()
    if rec is not None:
        rec.warnings.append(message)


def mark_cached() -> None:
    """Say that the current stage served its outputs from a cache instead of computing them."""
    rec = _current.get()
    if rec is not None:
        rec.status = "cached"


class stage_scope:
    """Context manager used by the runner: makes `rec` current and times it."""

    def __init__(self, rec: StageRecord):
        self.rec = rec

    def __enter__(self) -> StageRecord:
        self._token = _current.set(self.rec)
        self.rec.status = "ran"
        self._t0, self._cpu0 = time.perf_counter(), time.process_time()
        return self.rec

    def __exit__(self, *exc) -> None:
        self.rec.seconds = time.perf_counter() - self._t0
        self.rec.cpu_seconds = time.process_time() - self._cpu0
        _current.reset(self._token)
