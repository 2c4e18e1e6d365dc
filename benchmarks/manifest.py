"""Every committed results file and the command that writes it: what `python -m benchmarks` runs.

One `Bench` per file in benchmarks/results/. `args` is the full run that wrote the committed file;
`quick` the smoke run of the same script (`--quick`), written into a scratch folder and compared
with the committed file (whose figures come from the full run unless the file is itself a quick
run). In both, `{dir}` is the output folder. `headline` names the figures the results table shows:
paths into the JSON, keys joined by `/`; a `*` sums that level (e.g. `summary/*/found`). A new
benchmark adds its entries here.
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


# what `cascade_bench.py`'s results show: evidence found, tool answers exact and given, summed
GENRE_HEADLINE = (
    "by_genre/*/headline/evidence_found",
    "by_genre/*/headline/tool_exact",
    "by_genre/*/headline/tool_answers",
)
# what `browser_pages.py`'s results show, per genre: questions, evidence found, tool answers
BROWSER_HEADLINE = (
    "summary/*/questions",
    "summary/*/found",
    "summary/*/tool_answers",
    "summary/*/tool_exact",
)
REAL_MEDIA_HEADLINE = (
    "total/readable_questions",
    "total/found_hint",
    "total/tool_answers",
    "total/tool_exact",
)
DOCUMENT_GENRES = (
    "receipt",
    "heading",
    "table",
    "code",
    "paragraph",
    "ids",
    "zh_receipt",
    "photo_doc",
)
_GENRE_ARGS = tuple(a for g in DOCUMENT_GENRES for a in ("--genre", g))

MANIFEST: tuple[Bench, ...] = (
    Bench(
        "cascade_test_cpu.json",
        "cascade_bench.py",
        ("--split", "test", "--full-res", "estimate", "--size", "test", "--out", "{dir}"),
        ("--split", "test", "--quick", "--full-res", "estimate", "--out", "{dir}"),
        "cascade_test_quick_cpu.json",
        minutes=80,
        headline=GENRE_HEADLINE,
    ),
    Bench(
        "cascade_dev_quick_cpu.json",
        "cascade_bench.py",
        ("--split", "dev", "--quick", "--full-res", "estimate", "--out", "{dir}"),
        ("--split", "dev", "--quick", "--full-res", "estimate", "--out", "{dir}"),
        minutes=15,
        headline=GENRE_HEADLINE,
    ),
    Bench(
        "browser_pages_set1_cpu.json",
        "browser_pages.py",
        ("--set", "set1", "--out", "{dir}"),
        ("--set", "set1", "--quick", "--out", "{dir}"),
        "browser_pages_set1_quick_cpu.json",
        minutes=6,
        headline=BROWSER_HEADLINE,
    ),
    Bench(
        "browser_pages_set2_cpu.json",
        "browser_pages.py",
        ("--set", "set2", "--out", "{dir}"),
        ("--set", "set2", "--quick", "--out", "{dir}"),
        "browser_pages_set2_quick_cpu.json",
        minutes=8,
        headline=BROWSER_HEADLINE,
    ),
    Bench(
        "browser_pages_set2_first_pass_cpu.json",
        "browser_pages.py",
        (),
        None,
        frozen="the held-out set's first pass, on the code before its fixes: a record, not re-run",
        headline=BROWSER_HEADLINE,
    ),
    Bench(
        "browser_pages_set3_first_pass_cpu.json",
        "browser_pages.py",
        (),
        None,
        frozen="the third held-out set's first pass (`--set set3`), on the code after the "
        "relevance, question-reader and table-model work: a record, not re-run",
        headline=BROWSER_HEADLINE,
    ),
    Bench(
        "browser_pages_set4_first_pass_cpu.json",
        "browser_pages.py",
        (),
        None,
        frozen="the fourth held-out set's first pass (`--set set4`), on the code after the "
        "rows-as-units work: a record, not re-run",
        headline=BROWSER_HEADLINE,
    ),
    Bench(
        "browser_pages_set5_first_pass_cpu.json",
        "browser_pages.py",
        (),
        None,
        frozen="the fifth held-out set's first pass (`--set set5`), on the code after the work "
        "on lines meant alone and headings over the text meant: a record, not re-run",
        headline=BROWSER_HEADLINE,
    ),
    Bench(
        "browser_pages_set6_first_pass_cpu.json",
        "browser_pages.py",
        (),
        None,
        frozen="the sixth held-out set's first pass (`--set set6`), on the code after the "
        "learned reader's retyping and the question's second reading: a record, not re-run",
        headline=BROWSER_HEADLINE,
    ),
    Bench(
        "browser_pages_set7_first_pass_cpu.json",
        "browser_pages.py",
        (),
        None,
        frozen="the seventh held-out set's first pass (`--set set7`), on the code after the "
        "reader was trained on real-media questions and rows by their keys: a record, not re-run",
        headline=BROWSER_HEADLINE,
    ),
    Bench(
        "browser_pages_set8_first_pass_cpu.json",
        "browser_pages.py",
        (),
        None,
        frozen="the eighth held-out set's first pass (`--set set8`), on the code after cells, "
        "sentences and headings were found by meaning: a record, not re-run",
        headline=BROWSER_HEADLINE,
    ),
    Bench(
        "browser_pages_set9_first_pass_cpu.json",
        "browser_pages.py",
        (),
        None,
        frozen="the ninth held-out set's first pass (`--set set9`), on the code after traditional "
        "Chinese was read as simplified and a page's crops went up to 8: a record, not re-run",
        headline=BROWSER_HEADLINE,
    ),
    Bench(
        "structure_readers_dev.json",
        "structure_readers.py",
        ("--split", "dev", "--out", "{dir}/structure_readers_dev.json"),
        ("--split", "dev", "--quick", "--out", "{dir}/structure_readers_dev_quick.json"),
        "structure_readers_dev_quick.json",
        minutes=5,
        headline=(
            "per_target/*/n",
            "per_target/*/found",
            "per_target/*/exact",
            "per_target/*/wrong",
        ),
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
        headline=("recall/images", "recall/guided@0.25+lines", "recall/unguided@0.25"),
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
        headline=("recall/images", "recall/guided@0.25+lines", "recall/unguided@0.25"),
    ),
    Bench(
        "tower_evidence_test_quick_cpu.json",
        "tower_evidence.py",
        ("--quick", "--repeats", "3", "--out", "{dir}/tower_evidence_test_quick_cpu"),
        ("--quick", "--out", "{dir}/tower_evidence_test_quick_cpu"),
        headline=("recall/guided@0.25+lines", "ttft/e2e_ttft_speedup_vs_full/guided@0.25"),
        minutes=15,
    ),
    Bench(
        "vlm_cpu.json",
        "vlm.py",
        ("--threads", "1", "--out", "{dir}/vlm_cpu"),
        ("--quick", "--threads", "1", "--out", "{dir}/vlm_quick_cpu"),
        "vlm_quick_cpu.json",
        minutes=8,
        headline=(
            "e2e_ttft_speedup_vs_full/tower/0.25",
            "turn2/speedup_cache",
            "cost_model_max_rel_error",
        ),
    ),
    Bench(
        "vlm_quick_cpu.json",
        "vlm.py",
        ("--quick", "--threads", "1", "--out", "{dir}/vlm_quick_cpu"),
        ("--quick", "--threads", "1", "--out", "{dir}/vlm_quick_cpu"),
        headline=(
            "e2e_ttft_speedup_vs_full/tower/0.25",
            "turn2/speedup_cache",
            "cost_model_max_rel_error",
        ),
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
        headline=(
            "whole_question_growth_longest_vs_shortest_cold",
            "index_side_growth_longest_vs_shortest_cold",
            "temporal_pruning_sign_check/visual_tokens_kept",
        ),
    ),
    Bench(
        "index_resume_cpu.json",
        "index_resume.py",
        ("--out", "{dir}/index_resume_cpu"),
        ("--quick", "--out", "{dir}/index_resume_quick_cpu"),
        "index_resume_quick_cpu.json",
        minutes=12,
        headline=("uninterrupted/video_minutes_indexed_per_second", "resumed/chunks_now"),
    ),
    Bench(
        "engine_overhead_cpu.json",
        "engine_overhead.py",
        ("--out", "{dir}/engine_overhead_cpu.json"),
        ("--quick", "--out", "{dir}/engine_overhead_quick_cpu.json"),
        "engine_overhead_quick_cpu.json",
        minutes=1,
        headline=("us_per_stage/fan_out/best", "us_per_stage/chain/best"),
    ),
    Bench(
        "perception_cpu.json",
        "perception.py",
        ("--out", "{dir}/perception_cpu.json"),
        ("--quick", "--out", "{dir}/perception_quick_cpu.json"),
        "perception_quick_cpu.json",
        minutes=5,
        headline=("faiss/hnsw_10000/query_ms", "clip/images_per_s"),
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
        headline=("throughput_vs_concurrency_1/batched/32",),
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
        headline=(
            "throughput_vs_concurrency_1/batched/32",
            "throughput_vs_concurrency_1/one at a time/32",
        ),
    ),
    Bench(
        "soak_cpu.json",
        "soak.py",
        ("--out", "{dir}/soak_cpu"),
        ("--quick", "--out", "{dir}/soak_quick_cpu"),
        "soak_quick_cpu.json",
        minutes=32,
        headline=("requests", "server_5xx", "slopes/rss_mib/per_hour"),
    ),
    Bench(
        "ray_scale_cpu.json",
        "ray_scale.py",
        ("--out", "{dir}/ray_scale_cpu"),
        ("--quick", "--out", "{dir}/ray_scale_quick_cpu"),
        "ray_scale_quick_cpu.json",
        minutes=15,
        headline=("speedup_2_vs_1", "hop/hop_overhead_ms"),
    ),
    Bench(
        "kv_quick_cpu.json",
        "kv.py",
        ("--quick", "--out", "{dir}"),
        ("--quick", "--out", "{dir}"),
        minutes=12,
    ),
    Bench(
        "kv_drift_cpu.json",
        "kv_drift.py",
        ("--out", "{dir}"),
        ("--quick", "--out", "{dir}"),
        "kv_drift_quick_cpu.json",
        minutes=20,
    ),
    Bench(
        "real_media_first_pass_cpu.json",
        "real_media.py",
        (),
        None,
        frozen="the real-media set's first pass, on the code before any change for it: a record",
        headline=(
            "total/questions",
            "total/readable_questions",
            "total/found_hint",
            "total/tool_answers",
            "total/tool_exact",
        ),
    ),
    Bench(
        "real_media_test_cpu.json",
        "real_media.py",
        (),
        None,
        frozen="the real-media test split, reported once after the evidence work (`--split "
        "test`, rows on 32a0d8a): a record, not re-run",
        headline=REAL_MEDIA_HEADLINE,
    ),
    Bench(
        "real_media_test2_cpu.json",
        "real_media.py",
        (),
        None,
        frozen="the second real-media test split (new sources, written blind after the work), "
        "reported once (`--split test2`): a record, not re-run",
        headline=REAL_MEDIA_HEADLINE,
    ),
    Bench(
        "real_media_test3_cpu.json",
        "real_media.py",
        (),
        None,
        frozen="the third real-media test split (new sources, written blind after the work), "
        "reported once (`--split test3`): a record, not re-run",
        headline=REAL_MEDIA_HEADLINE,
    ),
    Bench(
        "real_media_test4_cpu.json",
        "real_media.py",
        (),
        None,
        frozen="the fourth real-media test split (new sources, written blind after the work), "
        "reported once (`--split test4`): a record, not re-run",
        headline=REAL_MEDIA_HEADLINE,
    ),
    Bench(
        "real_media_test5_cpu.json",
        "real_media.py",
        (),
        None,
        frozen="the fifth real-media test split (new sources, written blind after the work), "
        "reported once (`--split test5`): a record, not re-run",
        headline=REAL_MEDIA_HEADLINE,
    ),
    Bench(
        "real_media_test6_cpu.json",
        "real_media.py",
        (),
        None,
        frozen="the sixth real-media test split (new sources, written blind after the work), "
        "reported once (`--split test6`): a record, not re-run",
        headline=REAL_MEDIA_HEADLINE,
    ),
    Bench(
        "route_cost_quick_cpu.json",
        "route_cost.py",
        ("--quick", "--out", "{dir}"),
        ("--quick", "--out", "{dir}"),
        minutes=35,
        headline=(
            "measured/cost/seconds",
            "measured/cascade/seconds",
            "measured/full/seconds",
            "measured/cost/flops",
            "measured/cascade/flops",
            "measured/full/flops",
            "estimate_vs_measured/cascade/median_abs_error",
            "estimate_vs_measured/full/median_abs_error",
        ),
    ),
    Bench(
        # retrains the shipped weights (cascade/evidence/question_reader.npz): deterministic, the
        # same bytes again unless the data or the embedder changed
        "question_reader_cpu.json",
        "train_question_reader.py",
        ("--out", "{dir}/question_reader_cpu.json"),
        # the smoke run writes its weights beside its results, never over the shipped ones
        ("--out", "{dir}/question_reader_cpu.json", "--weights", "{dir}/question_reader.npz"),
        minutes=5,
        headline=("unseen_accuracy", "loso_ece_after_temperature"),
    ),
    Bench(
        "relevance_models_cpu.json",
        "relevance_models.py",
        ("--out", "{dir}/relevance_models_cpu.json"),
        ("--quick", "--out", "{dir}/relevance_models_cpu.json"),
        minutes=3,
    ),
    Bench(
        "disagg_cpu.json",
        "disagg.py",
        ("--out", "{dir}/disagg_cpu"),
        ("--quick", "--out", "{dir}/disagg_quick_cpu"),
        "disagg_quick_cpu.json",
        minutes=8,
        headline=(
            "ray/colocated/measured/ttft_p50_s",
            "ray/pd/measured/ttft_p50_s",
            "ray/epd/measured/ttft_p50_s",
            "ray/colocated/measured/worst_gap_p95_s",
            "ray/pd/measured/worst_gap_p95_s",
            "ray/epd/measured/worst_gap_p95_s",
        ),
    ),
    Bench(  # the generated test split's document genres, re-run after the tool sureness gate
        "cascade_test_" + "+".join(sorted(DOCUMENT_GENRES)) + "_cpu.json",
        "cascade_bench.py",
        (
            "--split",
            "test",
            "--full-res",
            "estimate",
            "--size",
            "test",
            *_GENRE_ARGS,
            "--out",
            "{dir}",
        ),
        ("--split", "test", "--quick", "--full-res", "estimate", *_GENRE_ARGS, "--out", "{dir}"),
        "cascade_test_quick_" + "+".join(sorted(DOCUMENT_GENRES)) + "_cpu.json",
        minutes=25,
        headline=GENRE_HEADLINE,
    ),
    Bench(
        "cascade_dev_quick_document_genres_relevance_cpu.json",
        "cascade_bench.py",
        (),
        None,
        frozen="relevance by meaning's no-regression check on the dev quick split's document "
        "genres (the whole run did not fit the shared machine's memory): a record",
        headline=GENRE_HEADLINE,
    ),
    Bench(
        "cascade_dev_quick_scene_genres_relevance_cpu.json",
        "cascade_bench.py",
        (),
        None,
        frozen="the same check on the dev quick split's scene and video genres: a record",
        headline=GENRE_HEADLINE,
    ),
    Bench(
        "tool_sureness_dev_cpu.json",
        "tool_sureness.py",
        ("--out", "{dir}/tool_sureness_dev_cpu.json"),
        ("--quick", "--out", "{dir}/tool_sureness_dev_quick_cpu.json"),
        "tool_sureness_dev_quick_cpu.json",
        minutes=10,
        headline=(
            "findings_total",
            "findings_exact",
            "calibration/threshold",
            "at_threshold/exact",
            "at_threshold/wrong",
        ),
    ),
    Bench(
        "real_media_dev_after_cpu.json",
        "real_media.py",
        ("--split", "dev", "--out", "{dir}/real_media_dev_after_cpu.json"),
        ("--split", "dev", "--quick", "--out", "{dir}/real_media_dev_after_cpu.json"),
        minutes=30,
        headline=REAL_MEDIA_HEADLINE,
    ),
)


def at(data: object, path: str) -> float | str | None:
    """The value at a `/`-joined path; a `*` sums that level's values (None when absent)."""
    head, _, rest = path.partition("/")
    if not isinstance(data, dict):
        return None
    if head == "*":
        found = [at(v, rest) if rest else v for v in data.values()]
        numbers = [v for v in found if isinstance(v, (int, float)) and not isinstance(v, bool)]
        return sum(numbers) if numbers else None
    if head not in data:
        return None
    return at(data[head], rest) if rest else data[head]
