"""The `Engine`'s seam for running stages elsewhere (what the Ray ingress uses): an `executor`
every served pipeline runs through, and the run-lock policy. Without the lock, runs of one
pipeline overlap, and a cancelled request stops only its own run (the cancel hook reads the
request's event from its context)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from cascade.serve.engine import Engine, RequestCancelled
from cascade.serve.media import Media

from .conftest import IMAGES, small_config

pytestmark = pytest.mark.slow


class Rendezvous:
    """A `StageExecutor` running `test_fault` stages here, each call waiting at a barrier until
    the other request's call is there too (it cannot pass unless two runs overlap), then calling
    `at_barrier` (in the waiting request's thread)."""

    def __init__(self, at_barrier=lambda question: None):
        self.barrier = threading.Barrier(2, timeout=120)
        self.at_barrier = at_barrier
        self.calls = 0

    def handles(self, stage) -> bool:
        return stage.type_name == "test_fault"

    def run(self, stage, inputs):
        self.barrier.wait()
        self.calls += 1
        self.at_barrier(inputs["question"])
        return stage.run(**inputs)


def _media(seed: int) -> list[Media]:
    pixels = np.random.default_rng(seed).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    return [Media("image", f"d{seed}", "messages[0].content[0]", pixels)]


def _ask_both(engine: Engine, cancels: dict[str, threading.Event]) -> dict[str, object]:
    served, results = engine.get(IMAGES), {}

    def ask(question: str, seed: int) -> None:
        try:
            results[question] = engine.answer(
                served, _media(seed), question, cancel=cancels[question]
            )
        except Exception as e:  # noqa: BLE001 - compared below
            results[question] = e

    threads = [threading.Thread(target=ask, args=(q, i)) for i, q in enumerate(cancels)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_without_the_run_lock_runs_of_one_pipeline_overlap_through_the_executor(tiny_vlm):
    executor = Rendezvous()
    engine = Engine(small_config(tiny_vlm), executor=executor)
    try:
        assert engine.get(IMAGES).qa.pipeline.executor is executor
        results = _ask_both(engine, {"first?": threading.Event(), "second?": threading.Event()})
    finally:
        engine.close()
    assert executor.calls == 2  # both runs were at the barrier at once
    assert all(a.produced_by == "vlm" for a in results.values()), results


def test_a_cancelled_request_stops_its_own_run_not_the_one_beside_it(tiny_vlm):
    cancels = {"keep?": threading.Event(), "drop?": threading.Event()}
    executor = Rendezvous(at_barrier=lambda q: cancels[q].set() if q == "drop?" else None)
    engine = Engine(small_config(tiny_vlm), executor=executor)
    try:
        results = _ask_both(engine, cancels)
    finally:
        engine.close()
    assert isinstance(results["drop?"], RequestCancelled)  # before its next stage
    assert str(results["drop?"]).startswith("cancelled before stage")
    assert results["keep?"].produced_by == "vlm"
