"""Every committed results file and the command that writes it: what `python -m benchmarks` runs.

One `Bench` per file in benchmarks/results/. `args` is the full run that wrote the committed file;
`quick` the smoke run of the same script (`--quick`), written into a scratch folder and compared
with the committed file (whose figures come from the full run unless the file is itself a quick
run). In both, `{dir}` is the output folder. `headline` names the figures the results table shows
(dotted paths into the JSON). A new benchmark adds its entries here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bench:
    """One results file: the script and arguments that write it, and its smoke run."""

    file: str
    script: str
    args: tuple[str, ...]
    quick: tuple[str, ...] | None
    quick_file: str | None = None  # the file the quick run writes (default: `file`)
    headline: tuple[str, ...] = ()
    minutes: float = 0.0  # the full run's wall time on the 2-core CPU box, roughly
    frozen: str = ""  # why it is not re-run (a record of a past run), when it is not


MANIFEST: tuple[Bench, ...] = (
    Bench(
        "cascade_test_cpu.json",
        "cascade_bench.py",
        ("--split", "test", "--full-res", "estimate", "--size", "test", "--out", "{dir}"),
        ("--split", "test", "--quick", "--full-res", "estimate", "--out", "{dir}"),
        "cascade_test_quick_cpu.json",
        ("by_genre.receipt.headline.tool_exact", "by_genre.table.headline.evidence_found"),
        minutes=80,
    ),
    Bench(
        "cascade_dev_quick_cpu.json",
        "cascade_bench.py",
        ("--split", "dev", "--quick", "--full-res", "estimate", "--out", "{dir}"),
        ("--split", "dev", "--quick", "--full-res", "estimate", "--out", "{dir}"),
        headline=("by_genre.receipt.headline.tool_exact",),
        minutes=15,
    ),
    Bench(
        "browser_pages_set1_cpu.json",
        "browser_pages.py",
        ("--set", "set1", "--out", "{dir}"),
        ("--set", "set1", "--quick", "--out", "{dir}"),
        "browser_pages_set1_quick_cpu.json",
        ("summary.all.found", "summary.all.tool_exact"),
        minutes=6,
    ),
    Bench(
        "browser_pages_set2_cpu.json",
        "browser_pages.py",
        ("--set", "set2", "--out", "{dir}"),
        ("--set", "set2", "--quick", "--out", "{dir}"),
        "browser_pages_set2_quick_cpu.json",
        ("summary.all.found", "summary.all.tool_exact"),
        minutes=8,
    ),
    Bench(
        "browser_pages_set2_first_pass_cpu.json",
        "browser_pages.py",
        (),
        None,
        headline=("summary.all.found", "summary.all.tool_wrong"),
        frozen="the held-out set's first pass, on the code before its fixes: a record, not re-run",
    ),
    Bench(
        "structure_readers_dev.json",
        "structure_readers.py",
        ("--split", "dev", "--out", "{dir}/structure_readers_dev.json"),
        ("--split", "dev", "--quick", "--out", "{dir}/structure_readers_dev_quick.json"),
        "structure_readers_dev_quick.json",
        minutes=5,
    ),
    Bench(
        "tower_evidence_test_cpu.json",
        "tower_evidence.py",
        (
            "--split",
            "test",
            "--no-ttft",
            "--ratios",
            "0.25",
            "--out",
            "{dir}/tower_evidence_test_cpu",
        ),
        ("--split", "test", "--quick", "--out", "{dir}/tower_evidence_test_quick_cpu"),
        "tower_evidence_test_quick_cpu.json",
        minutes=40,
    ),
    Bench(
        "tower_evidence_dev_cpu.json",
        "tower_evidence.py",
        (
            "--split",
            "dev",
            "--no-ttft",
            "--ratios",
            "0.25",
            "--out",
            "{dir}/tower_evidence_dev_cpu",
        ),
        ("--split", "dev", "--quick", "--out", "{dir}/tower_evidence_dev_quick_cpu"),
        "tower_evidence_dev_quick_cpu.json",
        minutes=40,
    ),
    Bench(
        "tower_evidence_test_quick_cpu.json",
        "tower_evidence.py",
        ("--quick", "--repeats", "3", "--out", "{dir}/tower_evidence_test_quick_cpu"),
        ("--quick", "--out", "{dir}/tower_evidence_test_quick_cpu"),
        minutes=15,
    ),
    Bench(
        "vlm_cpu.json",
        "vlm.py",
        ("--threads", "1", "--out", "{dir}/vlm_cpu"),
        ("--quick", "--threads", "1", "--out", "{dir}/vlm_quick_cpu"),
        "vlm_quick_cpu.json",
        minutes=8,
    ),
    Bench(
        "vlm_quick_cpu.json",
        "vlm.py",
        ("--quick", "--threads", "1", "--out", "{dir}/vlm_quick_cpu"),
        ("--quick", "--threads", "1", "--out", "{dir}/vlm_quick_cpu"),
        minutes=4,
    ),
    Bench(
        "reuse_cpu.json",
        "reuse.py",
        ("--out", "{dir}/reuse_cpu"),
        ("--quick", "--out", "{dir}/reuse_quick_cpu"),
        "reuse_quick_cpu.json",
        minutes=10,
    ),
    Bench(
        "reuse_quick_cpu.json",
        "reuse.py",
        ("--quick", "--out", "{dir}/reuse_quick_cpu"),
        ("--quick", "--out", "{dir}/reuse_quick_cpu"),
        minutes=2,
    ),
    Bench(
        "long_video_cpu.json",
        "long_video.py",
        ("--out", "{dir}/long_video_cpu"),
        ("--quick", "--out", "{dir}/long_video_quick_cpu"),
        "long_video_quick_cpu.json",
        minutes=30,
    ),
    Bench(
        "engine_overhead_cpu.json",
        "engine_overhead.py",
        ("--out", "{dir}/engine_overhead_cpu.json"),
        ("--quick", "--out", "{dir}/engine_overhead_quick_cpu.json"),
        "engine_overhead_quick_cpu.json",
        ("us_per_stage",),
        minutes=1,
    ),
    Bench(
        "perception_cpu.json",
        "perception.py",
        ("--out", "{dir}/perception_cpu.json"),
        ("--quick", "--out", "{dir}/perception_quick_cpu.json"),
        "perception_quick_cpu.json",
        minutes=5,
    ),
    Bench(
        "kernels_cpu.json",
        "kernels_bench.py",
        ("--threads", "1", "--out-dir", "{dir}"),
        ("--threads", "1", "--quick", "--out-dir", "{dir}"),
        "kernels_cpu_quick.json",
        minutes=5,
    ),
    Bench(
        "serve_load_cpu.json",
        "serve_load.py",
        ("--threads", "1", "--requests", "64", "--out", "{dir}/serve_load_cpu"),
        ("--quick", "--out", "{dir}/serve_load_quick_cpu"),
        "serve_load_quick_cpu.json",
        minutes=20,
    ),
    Bench(
        "serve_batching_cpu.json",
        "serve_load.py",
        (
            "--model",
            "cascade/thumbnail_only",
            "--max-tokens",
            "32",
            "--stream",
            "--requests",
            "48",
            "--batching",
            "both",
            "--threads",
            "1",
            "--out",
            "{dir}/serve_batching_cpu",
        ),
        (
            "--quick",
            "--model",
            "cascade/thumbnail_only",
            "--max-tokens",
            "32",
            "--stream",
            "--batching",
            "both",
            "--threads",
            "1",
            "--out",
            "{dir}/serve_batching_quick_cpu",
        ),
        "serve_batching_quick_cpu.json",
        minutes=15,
    ),
    Bench(
        "soak_cpu.json",
        "soak.py",
        ("--out", "{dir}/soak_cpu"),
        ("--quick", "--out", "{dir}/soak_quick_cpu"),
        "soak_quick_cpu.json",
        ("server_5xx",),
        minutes=32,
    ),
    Bench(
        "ray_scale_cpu.json",
        "ray_scale.py",
        ("--out", "{dir}/ray_scale_cpu"),
        ("--quick", "--out", "{dir}/ray_scale_quick_cpu"),
        "ray_scale_quick_cpu.json",
        minutes=15,
    ),
)
