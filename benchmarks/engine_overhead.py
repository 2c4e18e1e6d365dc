"""Engine overhead per stage: what `Pipeline.run` costs around stages that do nothing.

Two graph shapes of no-op stages: a fan-out (one source feeding N independent stages, all joined
by the outputs) and a chain of N stages. Reported: microseconds per stage of `run()` (validation
of inputs, scheduling, tracing, hooks; the stages' own work is a few additions), best and median
of interleaved rounds. The target is <= 100 us per stage on the fan-out.

    python benchmarks/engine_overhead.py          # 10 stages, 20 rounds x 200 runs
    python benchmarks/engine_overhead.py --quick  # a smoke run (timings mean little on a busy box)

Writes nothing unless --out is given; timings are only worth recording on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from cascade import Pipeline, Stage, StageParams, stage
from cascade.provenance import write_results
from cascade.registry import stage_types


def _register() -> None:
    if "bench_noop" in stage_types():
        return

    @stage("bench_noop")
    class Noop(Stage):
        """Add one to a number (the least a stage can do)."""

        class Params(StageParams):
            pass

        @dataclass(frozen=True)
        class Outputs:
            value: int

        def run(self, value: int) -> Outputs:
            return self.Outputs(value + 1)


def fan_out(n: int) -> str:
    stages = "\n".join(
        f"  s{i}: {{type: bench_noop, inputs: {{value: src.value}}}}" for i in range(n - 1)
    )
    outputs = "\n".join(f"  o{i}: s{i}.value" for i in range(n - 1))
    return (
        "name: fan_out\ninputs: {x: int}\nstages:\n  src: {type: bench_noop, inputs: {value: $x}}\n"
        f"{stages}\noutputs:\n{outputs}\n"
    )


def chain(n: int) -> str:
    stages = ["  s0: {type: bench_noop, inputs: {value: $x}}"]
    stages += [
        f"  s{i}: {{type: bench_noop, inputs: {{value: s{i - 1}.value}}}}" for i in range(1, n)
    ]
    return (
        "name: chain\ninputs: {x: int}\nstages:\n"
        + "\n".join(stages)
        + f"\noutputs:\n  y: s{n - 1}.value\n"
    )


def per_stage_us(pipeline: Pipeline, n_stages: int, runs: int) -> float:
    t = time.perf_counter()
    for _ in range(runs):
        pipeline.run(x=1)
    return (time.perf_counter() - t) / runs / n_stages * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--stages", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--runs", type=int, default=200, help="pipeline runs per round")
    ap.add_argument("--quick", action="store_true", help="3 rounds x 20 runs")
    ap.add_argument("--out", type=Path, default=None, help="write the result JSON here")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.runs = 3, 20
    _register()
    shapes = {
        "fan_out": Pipeline.from_yaml(fan_out(args.stages)),
        "chain": Pipeline.from_yaml(chain(args.stages)),
    }
    for p in shapes.values():  # warm: setup, first-call caches, the worker pool
        p.run(x=1)
    samples: dict[str, list[float]] = {k: [] for k in shapes}
    for _ in range(args.rounds):  # interleaved, so drift hits both shapes alike
        for name, p in shapes.items():
            samples[name].append(per_stage_us(p, args.stages, args.runs))
    result = {
        "benchmark": "engine overhead",
        "stages": args.stages,
        "rounds": args.rounds,
        "runs_per_round": args.runs,
        "python": platform.python_version(),
        "us_per_stage": {
            k: {"best": min(v), "median": statistics.median(v)} for k, v in samples.items()
        },
        "target_us_per_stage": 100.0,
    }
    result["meets_target"] = result["us_per_stage"]["fan_out"]["best"] <= 100.0
    print(json.dumps(result, indent=2))
    if args.out:
        write_results(args.out, result)


if __name__ == "__main__":
    main()
