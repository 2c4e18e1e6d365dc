"""Running pipelines: order, concurrency, routers and joins, traces, failures, inputs."""

import asyncio
import threading

import pytest

from cascade import InputError, Pipeline, StageError


def test_linear_pipeline_runs_in_order_and_traces(fixture_path):
    result = Pipeline.load(fixture_path("linear")).run(x=1)
    assert result["y"] == 12
    assert [r.name for r in result.trace.stages] == ["plus_one", "plus_ten"]
    assert all(r.status == "ran" for r in result.trace.stages)
    assert result.trace.counters["additions"] == 2
    assert result.trace["plus_ten"].counters == {"additions": 1}


def test_overrides_change_params(fixture_path):
    p = Pipeline.load(fixture_path("linear"), overrides={"plus_ten.amount": 100})
    assert p.run(x=1)["y"] == 102


def test_run_params_hold_for_one_run_only_even_side_by_side(fixture_path):
    """`run_params` gives a stage other params for the runs started inside the block; two runs
    of one pipeline object on two threads each see their own, and nothing stays on the stage."""
    from concurrent.futures import ThreadPoolExecutor

    from cascade.stage import run_params

    p = Pipeline.load(fixture_path("linear"))
    stage = p.stages["plus_ten"]
    both = threading.Barrier(2, timeout=10)

    def run(amount: int) -> int:
        with run_params({stage: stage.Params(amount=amount)}):
            both.wait()  # the two runs are inside their blocks at the same time
            return p.run(x=1)["y"]

    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(run, [100, 1000])) == [102, 1002]
    assert p.run(x=1)["y"] == 12 and stage.params.amount == 10


def test_independent_branches_run_concurrently(fixture_path):
    # Both `test_meet` stages wait on one 2-party barrier: run one after the other, they would
    # time out and fail. Passing proves they overlapped.
    result = Pipeline.load(fixture_path("diamond")).run(x=2)
    assert result["total"] == 4
    assert result.trace["total"].status == "ran"


@pytest.mark.parametrize(
    "x, branch, label, flipped", [(-5, "negative", "#996", 996), (7, "positive", "#7", None)]
)
def test_router_skips_untaken_branch_and_join_takes_first_that_ran(
    fixture_path, x, branch, label, flipped
):
    result = Pipeline.load(fixture_path("router_join")).run(x=x)
    assert result["route"].branch == branch
    assert result["label"] == label
    assert result["flipped"] == flipped
    status = {r.name: r.status for r in result.trace.stages}
    if branch == "positive":
        assert status == {
            "sign": "ran",
            "keep": "ran",
            "flip": "skipped",
            "after_flip": "skipped",
            "label": "ran",
        }
        assert "not taken" in result.trace["flip"].detail
        assert "was skipped or empty" in result.trace["after_flip"].detail
    else:
        assert status["keep"] == "skipped" and status["after_flip"] == "ran"
    assert result.trace["sign"].detail.startswith(f"branch={branch}")


def test_router_choosing_undeclared_branch_is_a_stage_error(fixture_path):
    p = Pipeline.load(fixture_path("router_join"), overrides={"sign.force": "sideways"})
    with pytest.raises(StageError, match=r"stage 'sign' \(test_sign_router\) failed: .*'sideways'"):
        p.run(x=1)


def test_stage_failure_names_stage_type_and_cause():
    text = (
        "name: f\ninputs: {x: int}\nstages:\n"
        "  boom: {type: test_fail, inputs: {value: $x}}\noutputs: {y: boom.value}\n"
    )
    with pytest.raises(StageError) as info:
        Pipeline.from_yaml(text).run(x=3)
    err = info.value
    assert (err.stage, err.stage_type) == ("boom", "test_fail")
    assert isinstance(err.cause, ZeroDivisionError)
    assert "ZeroDivisionError: cannot divide 3 by zero" in str(err)


def test_bad_inputs_are_input_errors(fixture_path):
    p = Pipeline.load(fixture_path("linear"))
    with pytest.raises(InputError, match=r"no input 'xx' \(did you mean 'x'\?\)"):
        p.run(xx=1)
    with pytest.raises(InputError, match="needs input 'x'"):
        p.run()
    with pytest.raises(InputError, match="input 'x': expected int, got 'ten'"):
        p.run(x="ten")
    assert p.run(x="4")["y"] == 15  # CLI strings are converted


def test_async_api_and_run_inside_event_loop(fixture_path):
    p = Pipeline.load(fixture_path("linear"))

    async def main():
        a = await p.arun(x=1)
        b = p.run(x=2)  # sync call from inside a running loop still works
        return a["y"], b["y"]

    assert asyncio.run(main()) == (12, 13)


def test_result_serializes(fixture_path):
    d = Pipeline.load(fixture_path("router_join")).run(x=3).to_dict()
    assert d["outputs"]["route"]["branch"] == "positive"
    assert {s["name"] for s in d["trace"]["stages"]} == {
        "sign",
        "flip",
        "keep",
        "after_flip",
        "label",
    }


def test_graph_rendering(fixture_path):
    p = Pipeline.load(fixture_path("router_join"))
    mermaid = p.to_mermaid()
    assert mermaid.startswith("flowchart TD")
    assert "sign -.->|negative| flip" in mermaid
    assert "after_flip -->|value| label" in mermaid
    dot = p.to_dot()
    assert dot.startswith('digraph "router_join"') and '"sign" -> "keep" [style=dashed' in dot
    assert p.graph.topological_order().index("sign") < p.graph.topological_order().index("keep")


def test_hooks_see_every_stage_including_skipped_and_failed(fixture_path):
    events = []

    class Recorder:
        def before_stage(self, rec):
            events.append(("before", rec.name, rec.status))

        def after_stage(self, rec):
            events.append(("after", rec.name, rec.status))

    p = Pipeline.load(fixture_path("router_join"))
    p.hooks.append(Recorder())
    p.run(x=5)
    assert ("after", "flip", "skipped") in events and not any(
        e[:2] == ("before", "flip") for e in events
    )
    assert events.index(("before", "sign", "pending")) < events.index(("after", "sign", "ran"))
    assert {e[1] for e in events if e[0] == "after"} == set(p.stages)

    failing = Pipeline.from_yaml(
        "name: f\ninputs: {x: int}\nstages:\n"
        "  boom: {type: test_fail, inputs: {value: $x}}\noutputs: {y: boom.value}\n"
    )
    failing.hooks.append(Recorder())
    events.clear()
    with pytest.raises(StageError):
        failing.run(x=1)
    assert events[-1] == ("after", "boom", "failed")


def test_a_stage_setup_never_overlaps_another_stage_run():
    from .toy_stages import GATE_LOG

    text = (
        "name: gate\ninputs: {x: int}\nstages:\n"
        "  a: {type: test_busy, inputs: {value: $x}}\n"
        "  b: {type: test_loads, inputs: {value: $x}}\n"
        "outputs: {a: a.value, b: b.value}\n"
    )
    GATE_LOG.clear()
    assert Pipeline.from_yaml(text).run(x=1).outputs == {"a": 1, "b": 1}
    # the two ran side by side, yet the load sat wholly before or after the run
    assert GATE_LOG in (
        ["run start", "run end", "setup start", "setup end"],
        ["setup start", "setup end", "run start", "run end"],
    )


def test_a_setup_from_outside_a_run_waits_for_the_stages_running():
    """A server loads its models in a background thread while requests run stages: that setup
    (`setup_stage`, what `Pipeline.setup` calls) waits for the running stages, as a request's own
    setups do, never runs beside them."""
    import threading
    import time

    from cascade.runner import _GATE, setup_stage

    order: list[str] = []
    started, release = threading.Event(), threading.Event()

    def a_stage_running() -> None:
        with _GATE.run():
            started.set()
            release.wait(10)
            order.append("run ended")

    class Loading:
        def ensure_setup(self) -> None:
            order.append("setup")

    runner = threading.Thread(target=a_stage_running)
    runner.start()
    assert started.wait(10)
    loader = threading.Thread(target=setup_stage, args=(Loading(),))
    loader.start()
    time.sleep(0.2)
    assert order == []  # the setup waits while the stage runs
    release.set()
    runner.join(10)
    loader.join(10)
    assert order == ["run ended", "setup"]
