"""`Pipeline.executor`: some stages' runs go elsewhere (a Ray Serve replica in production); the
runner's skipping, records, output checks and errors stay the same."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from cascade import Pipeline, StageError
from cascade.runner import StageExecutor
from cascade.trace import StageRecord, record, stage_scope


class OtherThread:
    """Runs `test_add` stages on a worker thread of its own, in a fresh record (as a replica
    does), and hands their counters back to the caller's record."""

    def __init__(self, types=("test_add",)):
        self.types, self.calls = set(types), []
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="elsewhere")

    def handles(self, stage) -> bool:
        return stage.type_name in self.types

    def run(self, stage, inputs):
        def remote():
            rec = StageRecord(stage.name, stage.type_name)
            with stage_scope(rec):
                out = stage.run(**inputs)
            return out, rec.counters, threading.current_thread().name

        out, counters, where = self.pool.submit(remote).result()
        self.calls.append((stage.name, where))
        record(**counters)
        return out


def test_handled_stages_run_through_the_executor_with_the_same_result(fixture_path):
    local = Pipeline.load(fixture_path("linear")).run(x=1)
    p = Pipeline.load(fixture_path("linear"))
    p.executor = ex = OtherThread()
    assert isinstance(ex, StageExecutor)
    result = p.run(x=1)
    assert result["y"] == local["y"] == 12
    assert [c[0] for c in ex.calls] == ["plus_one", "plus_ten"]
    assert all(where.startswith("elsewhere") for _, where in ex.calls)
    assert result.trace["plus_ten"].counters == {"additions": 1}  # recorded remotely, traced here
    assert [r.status for r in result.trace.stages] == ["ran", "ran"]


def test_executor_failures_and_bad_outputs_are_stage_errors():
    text = (
        "name: f\ninputs: {x: int}\nstages:\n"
        "  boom: {type: test_fail, inputs: {value: $x}}\noutputs: {y: boom.value}\n"
    )
    p = Pipeline.from_yaml(text)
    p.executor = OtherThread(types=("test_fail",))
    with pytest.raises(StageError) as info:
        p.run(x=3)
    assert isinstance(info.value.cause, ZeroDivisionError) and info.value.stage == "boom"

    class WrongType(OtherThread):
        def run(self, stage, inputs):
            return "not the stage's Outputs"

    p = Pipeline.from_yaml(text)
    p.executor = WrongType(types=("test_fail",))
    with pytest.raises(StageError, match="returned str, expected Outputs"):
        p.run(x=3)


def test_setup_skips_the_stages_the_executor_runs(fixture_path):
    p = Pipeline.load(fixture_path("linear"))
    p.executor = OtherThread()
    p.setup()
    assert not any(st._is_setup for st in p.stages.values())
