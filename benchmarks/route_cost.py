"""The path route on a mix of media: total cost and evidence under `cost`, `cascade` and `full`.

    CASCADE_CALIBRATION_DIR=$(mktemp -d) python benchmarks/route_cost.py --quick   # ~30 min

The mix (test split of the generated evaluation set, held apart from the dev split the device
was calibrated on): small scans (receipts), large pages (heading / table pages at 3x: several
megapixels), image sets (five photos, one with a sign) and videos (a sign in one scene); and real
scans (receipt photos and a scanned page of `benchmarks/real_media`, its dev split). Every
question runs through the shipped pipeline with the cascade forced and with the full path forced,
caches emptied first (after one unmeasured run of each path per pipeline), in `--rounds`
interleaved rounds (every question and path once, then again, the paths' order alternating), the
fastest run kept. One thread everywhere (torch and every onnxruntime session), the 1-minute load
average recorded: the machine is shared. `cost` is the path its route picks (the route stage run
alone, on the same calibration): the pipeline is deterministic given the path, so its cost is
that forced run's.

Two accountings, both on this machine:

- **measured**: the model that runs (the random-weight "test" Qwen2-VL at native resolution) is
  also the one priced (`priced_as` itself), its throughput measured here first; seconds are the
  whole run's on the device's clock (`cascade.calibration.device_clock`: this process's CPU
  seconds at one thread, which the other jobs on a shared machine do not inflate; wall seconds
  are recorded beside them). FLOPs are the VLM's cost-model FLOPs plus the specialists' FLOPs
  counted during the run (`cascade.flop_count`: OCR, layout and YOLO from their ONNX graphs at
  each call's input shapes, CLIP and the sentence encoders replayed under torch's FLOP counter).
  This is where the estimate is checked against what was measured, per path and per run.
- **declared**: what the same runs cost with the declared Qwen2-VL-2B as the VLM on this CPU: the
  specialists' measured seconds plus the 2B's FLOPs of exactly the pixels each run sent, turned
  into seconds by the cached calibration's throughput (measured on the "bench" architecture:
  a 2B cannot run here). `cost` takes the path the route picks when priced as the 2B.

Evidence: a read / document question's evidence is found when a tool answered it exactly
(`judge.same_span`) or the real OCR judge reads the gold in the pixels sent to the VLM, at the
size sent (`judge.Readers`). The device's calibration is `cascade doctor --calibrate`'s when cached;
what it lacks is measured here first, the same way (dev split), and cached.
Writes `benchmarks/results/route_cost[_quick]_cpu.json` and `.png`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

POLICIES = ("cascade", "full", "cost")
PIPE = {"document": "doc_qa", "images": "multi_image_qa", "video": "video_qa"}


def pick_items(quick: bool) -> list[tuple[str, Any]]:
    """(category, item): small scans, large pages, image sets, videos of the test split."""
    from cascade.calibrate import upscaled
    from cascade.eval.build import build_eval_set
    from cascade.vlm import default_tiny_dir

    media = default_tiny_dir().parent / "evalset"
    n = 1 if quick else 3
    by_genre: dict[str, list[Any]] = {}
    genres = ["receipt", "heading", "table", "image_sign", "video_sign"]
    for it in build_eval_set(media, "test", quick=True, genres=genres):
        if it.kind in ("read", "doc"):
            by_genre.setdefault(it.genre, []).append(it)
    out = [("small scan", it) for it in by_genre["receipt"][: n + 1]]  # quick: 2 of each page
    out += [
        ("large page", upscaled(it, 3)) for it in (by_genre["heading"] + by_genre["table"])[: n + 1]
    ]
    out += [("image set", it) for it in by_genre["image_sign"][:n]]
    out += [("video", it) for it in by_genre["video_sign"][:n]]
    return out + real_scans(n + 1)


def real_scans(n: int) -> list[tuple[str, Any]]:
    """Real media nobody here made (`benchmarks/real_media`, dev split: the evidence work holds
    its test split apart): the first English question of `n` receipt photos and of one scanned
    page, questions written by people before any run."""
    from real_media import load_questions

    out: list[tuple[str, Any]] = []
    for source, count in (("receipts_de", n), ("ocrmypdf", 1)):
        seen: set[tuple[str, ...]] = set()
        for it in load_questions(split="dev", sources=[source]):
            if it.lang == "en" and it.media not in seen and len(seen) < count:
                seen.add(it.media)
                out.append(("real scan", it))
    return out


def _route_alone(stage: Any, item: Any, media: Any) -> Any:
    """The path stage's route for this media, run alone (no specialist, no VLM)."""
    from cascade.artifacts import Image

    if item.media_kind == "video":
        return stage.run(video=Path(media)).route
    return stage.run(images=[Image.open(m, media_index=i) for i, m in enumerate(media)]).route


def sent_images(answer: Any) -> list[Any]:
    return list(answer.evidence.images) if answer.produced_by == "vlm" else []


def found(item: Any, answer: Any, readers: Any) -> bool:
    from cascade.eval.judge import evidence_order, same_span

    if answer.produced_by == "tool":
        return same_span(answer.text, item.answer)
    order = evidence_order(item, sent_images(answer))
    return readers.reads(order, item.answer, readers.full_res)


def declared_vlm(images: list[Any], family: Any, cal: Any, prompt: int, answer: int) -> tuple:
    """(seconds, FLOPs) of the declared model reading exactly these images on this device."""
    from cascade.cost import decode_flops, prefill_flops

    if not images:
        return 0.0, 0.0
    costs = [family.image_cost(im.width, im.height) for im in images]
    n = sum(c.tokens for c in costs) + prompt
    llm = family.shapes.llm
    flops = family.vision_flops(costs) + prefill_flops(llm, n) + decode_flops(llm, n, answer)
    return cal.vlm.seconds(flops, answer, n - prompt), flops


@contextlib.contextmanager
def calibration_env(folder: str | None) -> Iterator[None]:
    """Read calibrations from `folder` (None: the default cache) inside the block."""
    saved = os.environ.get("CASCADE_CALIBRATION_DIR")
    if folder is None:
        os.environ.pop("CASCADE_CALIBRATION_DIR", None)
    else:
        os.environ["CASCADE_CALIBRATION_DIR"] = folder
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("CASCADE_CALIBRATION_DIR", None)
        else:
            os.environ["CASCADE_CALIBRATION_DIR"] = saved


def pin_threads() -> None:
    """One thread everywhere, recorded: torch, and every onnxruntime session the specialists open
    (their default pool takes every core; on a machine shared with other jobs that is noise)."""
    import onnxruntime
    import torch

    torch.set_num_threads(1)
    original = onnxruntime.InferenceSession.__init__

    def one_thread(self: Any, path_or_bytes: Any, sess_options: Any = None, *a: Any, **k: Any):
        options = sess_options or onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        original(self, path_or_bytes, options, *a, **k)

    onnxruntime.InferenceSession.__init__ = one_thread  # type: ignore[method-assign]


def run(
    quick: bool,
    on_rows: Callable[[dict[str, Any]], Any],
    limit: int | None = None,
    only: list[str] | None = None,
    rounds: int = 2,
) -> dict[str, Any]:
    """Every question of the mix on both paths, `rounds` interleaved rounds (every question and
    path once, then again; the paths' order alternates), the fastest run of each kept; `on_rows`
    gets the summary after each question (a long run leaves its results so far)."""
    import torch

    from cascade.api import QA
    from cascade.calibrate import (
        calibration_items,
        measure_pipeline,
        measure_vlm,
        run_priced,
        upscaled,
    )
    from cascade.calibration import (
        Calibration,
        device_clock,
        device_label,
        load_calibration,
        save_calibration,
    )
    from cascade.eval.judge import Readers
    from cascade.vlm import build_tiny_vlm, default_tiny_dir

    pin_threads()
    load = [os.getloadavg()[0]]
    label, clock = device_label("cpu"), device_clock("cpu")
    declared_dir = os.environ.get("CASCADE_CALIBRATION_DIR")
    declared_cal = load_calibration(label)
    if declared_cal is None:  # what `cascade doctor --calibrate` measures, measured here
        print("no calibration cached: VLM throughput on the 'bench' architecture ...", flush=True)
        vlm, _ = measure_vlm(str(build_tiny_vlm(size="bench")), rounds=rounds + 1)
        declared_cal = Calibration(
            label, torch.get_num_threads(), "route_cost.py", vlm, {}, clock=clock
        )
    tiny = str(build_tiny_vlm(size="test"))
    print(f"VLM throughput of the model that runs ({tiny}, native resolution) ...", flush=True)
    fit, fit_points = measure_vlm(tiny, token_counts=(64, 256, 1024, 4096, 8192), rounds=rounds + 1)
    measured_dir = tempfile.mkdtemp(prefix="route-cost-calibration-")
    readers = Readers(model=tiny)
    items = [x for x in pick_items(quick) if only is None or x[0] in only][:limit]
    dev = calibration_items(default_tiny_dir().parent / "evalset", quick=True)
    n_dev = {"document": 3, "images": 2, "video": 2}
    qas: dict[str, Any] = {}
    declared_route: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    for round_ in range(rounds):
        for i, (category, it) in enumerate(items):
            pipe, media = PIPE[it.media_kind], it.media_arg()
            if pipe not in qas:
                qas[pipe] = QA.offline(
                    pipe,
                    model_options={"priced_as": tiny, "resolution": "full"},
                    type_overrides={"vlm_answer": {"max_new_tokens": 8}},
                ).setup()
                if pipe not in declared_cal.pipelines:  # its specialists, on dev media (warms up)
                    print(f"calibrating {pipe}'s specialists on the dev split ...", flush=True)
                    picked = dev[it.media_kind][: n_dev[it.media_kind]]
                    if it.media_kind == "document":  # the same pages, large
                        picked += [upscaled(d, 2) for d in picked]
                    costs, _ = measure_pipeline(qas[pipe], picked, rounds=rounds, clock=clock)
                    declared_cal = replace(
                        declared_cal, pipelines={**declared_cal.pipelines, pipe: costs}
                    )
                    with calibration_env(declared_dir):
                        save_calibration(declared_cal)
                else:
                    for policy in ("cascade", "full"):  # unmeasured: specialists load on first use
                        qas[pipe].ask(media, it.question, route_policy=policy)
                with calibration_env(measured_dir):
                    save_calibration(replace(declared_cal, vlm=fit))
                # the same pipeline as users run it offline: the declared 2B priced
                declared_route[pipe] = QA.offline(pipe).pipeline.stages["path"]
            if round_ == 0:
                rows.append(
                    first_row(
                        category, it, declared_route[pipe], declared_dir, measured_dir, qas[pipe]
                    )
                )
            row = rows[i]
            order = ("cascade", "full") if (i + round_) % 2 == 0 else ("full", "cascade")
            for policy in order:
                with calibration_env(measured_dir):
                    r, answer = run_priced(
                        qas[pipe], media, it.question, policy, count_flops=round_ == 0, clock=clock
                    )
                load.append(os.getloadavg()[0])
                if round_ == 0:
                    d_s, d_flops = declared_vlm(
                        sent_images(answer), row["family_2b"], declared_cal, 96, 8
                    )
                    row[policy] = {
                        "path": r["path"],
                        "estimated_s": r.get(f"est_{r['path']}_s"),
                        "produced_by": r["produced_by"],
                        "evidence": found(it, answer, readers),
                        "vlm_flops": r["flops"],
                        "specialist_flops": r["specialist_flops"],
                        "specialist_flops_by_stage": r["specialist_flops_by_stage"],
                        "uncounted": r["uncounted"],
                        "declared_vlm_s": d_s,
                        "declared_vlm_flops": d_flops,
                        "rounds_s": [],
                        "rounds_wall_s": [],
                    }
                t = row[policy]
                t["rounds_s"].append(r["seconds"])
                t["rounds_wall_s"].append(r["wall_seconds"])
                if r["seconds"] <= min(t["rounds_s"]):  # the fastest run, and its VLM share
                    t["seconds"], t["vlm_seconds"] = r["seconds"], r["vlm_seconds"]
                t["declared_seconds"] = t["seconds"] - t["vlm_seconds"] + t["declared_vlm_s"]
                print(
                    f"round {round_} {it.id:<24} {policy:<8} {r['seconds']:7.2f} s "
                    f"(est {t['estimated_s']:.2f}) evidence {t['evidence']} "
                    f"specialists {t['specialist_flops'] / 1e9:.1f} GFLOP",
                    flush=True,
                )
            on_rows(summarize(rows, quick, declared_cal, fit, fit_points, rounds, load))
    return summarize(rows, quick, declared_cal, fit, fit_points, rounds, load)


def first_row(
    category: str,
    it: Any,
    declared_stage: Any,
    declared_dir: str | None,
    measured_dir: str,
    qa: Any,
) -> dict[str, Any]:
    """A question's row before its runs: both models' route decisions (the route alone)."""
    media = it.media_arg()
    with calibration_env(declared_dir):
        d_route = _route_alone(declared_stage, it, media)
    with calibration_env(measured_dir):  # the measured model's decision under `cost`
        m_route = _route_alone(qa.pipeline.stages["path"], it, media)
    print(f"{it.id:<28} cost -> {m_route.branch}; declared 2B -> {d_route.branch}", flush=True)
    return {
        "id": it.id,
        "category": category,
        "genre": it.genre,
        "media": it.media_kind,
        "cost_route": m_route.branch,
        "cost_scores": m_route.scores,
        "declared_route": d_route.branch,
        "declared_scores": d_route.scores,
        "family_2b": declared_stage.model("vlm").pricing_family,
    }


def _err(rows: list[dict[str, Any]], path: str) -> dict[str, Any]:
    """The route's estimate of `path` against the fastest measured run, per run and overall."""
    per = [
        {
            "id": r["id"],
            "category": r["category"],
            "estimated_s": r[path]["estimated_s"],
            "measured_s": r[path]["seconds"],
            "error": r[path]["estimated_s"] / r[path]["seconds"] - 1,
        }
        for r in rows
        if "seconds" in r.get(path, {})
    ]
    errs = [abs(x["error"]) for x in per]
    # the noise floor: how far the same run, repeated, lands from its fastest repeat
    spread = [max(r[path]["rounds_s"]) / min(r[path]["rounds_s"]) - 1 for r in rows]
    # how much slower the wall clock ran than the measuring clock: the other jobs' share
    wall = [min(r[path]["rounds_wall_s"]) / min(r[path]["rounds_s"]) for r in rows]
    return {
        "repeat_spread_median": statistics.median(spread),
        "repeat_spread_max": max(spread),
        "wall_over_clock_median": statistics.median(wall),
        "total_error": sum(x["estimated_s"] for x in per) / sum(x["measured_s"] for x in per) - 1,
        "median_abs_error": statistics.median(errs),
        "max_abs_error": max(errs),
        "within_25_percent": sum(e <= 0.25 for e in errs),
        "runs": len(per),
        "per_run": per,
    }


def summarize(rows, quick, declared_cal, fit, fit_points, rounds, load) -> dict[str, Any]:
    import torch

    done = [r for r in rows if "seconds" in r.get("cascade", {}) and "seconds" in r.get("full", {})]
    return {
        "quick": quick,
        "device": declared_cal.device,
        "threads": {"torch": torch.get_num_threads(), "onnxruntime": 1},
        "rounds": rounds,
        "clock": f"{declared_cal.clock}: "
        + (
            "this process's CPU seconds (one compute thread: wall seconds on an idle machine, "
            "unmoved by other jobs on the shared cores); wall seconds beside them"
            if declared_cal.clock == "cpu"
            else "wall seconds"
        ),
        "statistic": "fastest of the interleaved rounds, per question and path",
        "load_average_1min": {
            "min": min(load),
            "max": max(load),
            "median": statistics.median(load),
        },
        "split": "test (calibrated on dev)",
        "measured_model": "random-weight tiny Qwen2-VL ('test'), native resolution, priced as "
        "itself",
        "declared_model": "Qwen/Qwen2-VL-2B-Instruct (reference config), VLM seconds priced",
        "vlm_fit_measured_model": {**fit.__dict__, "points": fit_points},
        "vlm_fit_declared": declared_cal.vlm.__dict__,
        "specialists": {
            k: {"cascade": v.cascade.__dict__, "full": v.full.__dict__, "vlm_share": v.vlm_share}
            for k, v in declared_cal.pipelines.items()
        },
        "note": "FLOPs = the VLM's (cost model: tower, prefill, decode) + the specialists' "
        "(cascade.flop_count: ONNX OCR / layout / YOLO Conv+MatMul+Gemm on shapes inferred at "
        "each call's inputs; torch CLIP / sentence encoders replayed under FlopCounterMode). "
        "Element-wise ops, resizes, NMS, FAISS are counted on neither side. 'declared' VLM "
        "seconds are priced, not run.",
        **totals(done),
    }


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per policy and accounting: seconds, FLOPs (VLM + specialists), evidence recall;
    estimate-vs-measured per path. `cost` is the forced run of the path its route picked."""
    if not rows:
        return {"rows": []}

    def run_of(r: dict[str, Any], policy: str, route_key: str) -> dict[str, Any]:
        return r[r[route_key] if policy == "cost" else policy]

    def table(route_key: str, s_key: str, vlm_key: str) -> dict[str, Any]:
        out = {}
        for p in POLICIES:
            runs = [run_of(r, p, route_key) for r in rows]
            vlm = sum(t[vlm_key] for t in runs)
            spec = sum(t["specialist_flops"] for t in runs)
            out[p] = {
                "seconds": sum(t[s_key] for t in runs),
                "flops": vlm + spec,
                "vlm_flops": vlm,
                "specialist_flops": spec,
                "evidence_recall": sum(t["evidence"] for t in runs) / len(rows),
                "paths": {b: sum(t["path"] == b for t in runs) for b in ("full", "cascade")},
            }
        return out

    measured = table("cost_route", "seconds", "vlm_flops")
    declared = table("declared_route", "declared_seconds", "declared_vlm_flops")

    def meets(t: dict[str, Any]) -> dict[str, bool]:
        best_s = min(t["cascade"]["seconds"], t["full"]["seconds"])
        best_f = min(t["cascade"]["flops"], t["full"]["flops"])
        best_r = max(t["cascade"]["evidence_recall"], t["full"]["evidence_recall"])
        return {
            "seconds_le_cheaper": t["cost"]["seconds"] <= best_s * 1.0001,
            "flops_le_cheaper": t["cost"]["flops"] <= best_f * 1.0001,
            "recall_ge_better": t["cost"]["evidence_recall"] >= best_r,
        }

    uncounted = sorted({u for r in rows for p in ("cascade", "full") for u in r[p]["uncounted"]})
    return {
        "mix": {
            c: sum(r["category"] == c for r in rows)
            for c in dict.fromkeys(r["category"] for r in rows)
        },
        "measured": measured,
        "declared": declared,
        "flops_uncounted": uncounted,
        "estimate_vs_measured": {p: _err(rows, p) for p in ("cascade", "full")},
        "must_show": {"measured": meets(measured), "declared": meets(declared)},
        "rows": [{k: v for k, v in r.items() if k != "family_2b"} for r in rows],
    }


def merge(files: list[str]) -> dict[str, Any]:
    """Results of runs over parts of the mix (`--only`), as one: each part's calibration kept."""
    parts = [json.loads(Path(f).read_text()) for f in files]
    meta = [{k: v for k, v in p.items() if k not in ("rows", "mix", "measured", "declared",
             "estimate_vs_measured", "must_show", "flops_uncounted")} for p in parts]  # fmt: skip
    return {**meta[0], "parts": meta, **totals([r for p in parts for r in p["rows"]])}


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, key, title in (
        (axes[0], "measured", "measured: tiny VLM, this CPU"),
        (axes[1], "declared", "declared Qwen2-VL-2B, this CPU"),
    ):
        t = result[key]
        secs = [t[p]["seconds"] for p in POLICIES]
        ax.bar(POLICIES, secs, color=["#888", "#4a90d9", "#2a9d4a"])
        for i, p in enumerate(POLICIES):
            ax.text(
                i,
                secs[i],
                f"{secs[i]:.0f} s\n{t[p]['flops'] / 1e12:.2f} TFLOP\n"
                f"recall {t[p]['evidence_recall']:.2f}",
                ha="center",
                va="bottom",
                fontsize=8,
            )
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("total seconds")
        ax.set_ylim(0, max(secs) * 1.4)
    rows = result["rows"]
    for branch, colour in (("cascade", "#888"), ("full", "#4a90d9")):
        axes[2].scatter(
            [r[branch]["seconds"] for r in rows],
            [r[branch]["estimated_s"] for r in rows],
            label=branch,
            color=colour,
            s=18,
        )
    hi = max(max(r[p]["seconds"], r[p]["estimated_s"]) for r in rows for p in ("cascade", "full"))
    axes[2].plot([0, hi], [0, hi], "k:", lw=0.8)
    axes[2].set_xlabel("measured s")
    axes[2].set_ylabel("estimated s")
    axes[2].set_title("estimate vs measured, per run", fontsize=9)
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one or two questions per category")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    ap.add_argument("--merge", nargs="+", default=None, help="merge these result files")
    ap.add_argument("--limit", type=int, default=None, help="the first N questions only (a check)")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds, fastest kept")
    ap.add_argument(
        "--only",
        action="append",
        default=None,
        help="this category only (repeatable): 'small scan', 'large page', 'image set', 'video', "
        "'real scan'",
    )
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = f"route_cost{'_quick' if args.quick else ''}_cpu"

    def write(result: dict[str, Any]) -> None:
        from cascade.provenance import write_results

        # numpy numbers as plain floats first (the stamp's writer would make them strings)
        write_results(out / f"{tag}.json", json.loads(json.dumps(result, default=float)))
        plot(result, out / f"{tag}.png")

    result = (
        merge(args.merge)
        if args.merge
        else run(args.quick, write, args.limit, args.only, args.rounds)
    )
    if args.merge:
        write(result)
    for key in ("measured", "declared"):
        for p in POLICIES:
            t = result[key][p]
            print(
                f"{key:<9}{p:<8}{t['seconds']:9.1f} s {t['flops'] / 1e12:9.3f} TFLOP "
                f"(VLM {t['vlm_flops'] / 1e12:.3f}) recall {t['evidence_recall']:.2f} "
                f"paths {t['paths']}"
            )
    print(
        json.dumps(
            {
                "estimate_vs_measured": {
                    p: {k: v for k, v in e.items() if k != "per_run"}
                    for p, e in result["estimate_vs_measured"].items()
                },
                "load_average_1min": result["load_average_1min"],
                "must_show": result["must_show"],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
