"""The path route on a mix of media: total cost and evidence under `cost`, `cascade` and `full`.

    python benchmarks/route_cost.py --quick      # ~20 min on a shared 2-core CPU

The mix (test split of the generated evaluation set, held apart from the dev split the device
was calibrated on): small scans (receipts), large pages (heading / table pages at 3x: several
megapixels), image sets and videos. Every question runs through the shipped pipeline three times,
caches emptied first (after one unmeasured run of each path per pipeline): the cascade forced and
the full path forced. `cost` is the path its route picks (the route stage run alone, on the same
calibration): the pipeline is deterministic given the path, so its cost is that forced run's.

Two accountings, both on this machine:

- **measured**: the model that runs (the random-weight "test" Qwen2-VL at native resolution) is
  also the one priced (`priced_as` itself), its throughput measured here first; seconds are wall
  seconds of the whole run, FLOPs the VLM's cost-model FLOPs. This is where the estimate is checked
  against what was measured, per path.
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
import time
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
    return cal.vlm.seconds(flops, answer), flops


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


def run(
    quick: bool,
    on_rows: Callable[[dict[str, Any]], Any],
    limit: int | None = None,
    only: list[str] | None = None,
) -> dict[str, Any]:
    """Every question of the mix on both paths; `on_rows` gets the summary after each (a long
    run leaves its results so far)."""
    import torch

    from cascade.api import QA
    from cascade.cache import clear_all_caches
    from cascade.calibrate import calibration_items, measure_pipeline, measure_vlm, upscaled
    from cascade.calibration import Calibration, device_label, load_calibration, save_calibration
    from cascade.eval.judge import Readers
    from cascade.vlm import build_tiny_vlm, default_tiny_dir

    label = device_label("cpu")
    declared_dir = os.environ.get("CASCADE_CALIBRATION_DIR")
    declared_cal = load_calibration(label)
    if declared_cal is None:  # what `cascade doctor --calibrate` measures, measured here
        print("no calibration cached: VLM throughput on the 'bench' architecture ...", flush=True)
        vlm, _ = measure_vlm(str(build_tiny_vlm(size="bench")), rounds=1)
        declared_cal = Calibration(label, torch.get_num_threads(), "route_cost.py", vlm, {})
    tiny = str(build_tiny_vlm(size="test"))
    print(f"VLM throughput of the model that runs ({tiny}, native resolution) ...", flush=True)
    fit, fit_points = measure_vlm(tiny, token_counts=(64, 1024, 8192))
    measured_dir = tempfile.mkdtemp(prefix="route-cost-calibration-")
    readers = Readers(model=tiny)
    items = [x for x in pick_items(quick) if only is None or x[0] in only][:limit]
    dev = calibration_items(default_tiny_dir().parent / "evalset", quick=True)
    n_dev = {"document": 2, "images": 2, "video": 1}
    qas: dict[str, Any] = {}
    declared_route: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    for category, it in items:
        pipe = PIPE[it.media_kind]
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
                costs, _ = measure_pipeline(qas[pipe], picked)
                declared_cal = replace(
                    declared_cal, pipelines={**declared_cal.pipelines, pipe: costs}
                )
                with calibration_env(declared_dir):
                    save_calibration(declared_cal)
            else:
                for policy in ("cascade", "full"):  # unmeasured: specialists load on first use
                    qas[pipe].ask(it.media_arg(), it.question, route_policy=policy)
            with calibration_env(measured_dir):
                save_calibration(replace(declared_cal, vlm=fit))
            # the same pipeline as users run it offline: the declared 2B priced
            declared_route[pipe] = QA.offline(pipe).pipeline.stages["path"]
        qa = qas[pipe]
        media = it.media_arg()
        # the declared model's decision, on the device's calibration (the route alone: cheap)
        stage = declared_route[pipe]
        with calibration_env(declared_dir):
            d_route = _route_alone(stage, it, media)
        family_2b = stage.model("vlm").pricing_family
        row: dict[str, Any] = {
            "id": it.id,
            "category": category,
            "genre": it.genre,
            "media": it.media_kind,
            "declared_route": d_route.branch,
            "declared_scores": d_route.scores,
        }
        with calibration_env(measured_dir):  # the measured model's decision under `cost`
            m_route = _route_alone(qa.pipeline.stages["path"], it, media)
        for policy in ("cascade", "full"):
            clear_all_caches()
            t0 = time.perf_counter()
            with calibration_env(measured_dir):
                answer = qa.ask(media, it.question, route_policy=policy)
            wall = time.perf_counter() - t0
            vlm_s = sum(r.seconds for r in answer.trace.stages if r.type == "vlm_answer")
            route = next(r for r in answer.evidence.routes if r.branch in ("full", "cascade"))
            d_s, d_flops = declared_vlm(sent_images(answer), family_2b, declared_cal, 96, 8)
            row[policy] = {
                "path": route.branch,
                "seconds": wall,
                "vlm_seconds": vlm_s,
                "flops": answer.bill.flops,
                "estimated_s": route.scores.get(f"{route.branch}_s"),
                "produced_by": answer.produced_by,
                "evidence": found(it, answer, readers),
                "declared_seconds": wall - vlm_s + d_s,
                "declared_flops": d_flops,
            }
            print(
                f"{it.id:<28} {policy:<8} {wall:7.2f} s (est {row[policy]['estimated_s']:.2f}) "
                f"evidence {row[policy]['evidence']}",
                flush=True,
            )
        # `cost` takes the path its route picks; the pipeline is deterministic given the path,
        # so its run is the forced run of that path (not run a third time)
        row["cost"] = {**row[m_route.branch], "route_scores": m_route.scores}
        print(f"{it.id:<28} cost -> {m_route.branch}; declared 2B -> {d_route.branch}", flush=True)
        rows.append(row)
        on_rows(
            summarize(rows, quick, label, declared_cal, fit, fit_points, torch.get_num_threads())
        )
    return summarize(rows, quick, label, declared_cal, fit, fit_points, torch.get_num_threads())


def _err(est: list[float], meas: list[float]) -> dict[str, float]:
    per = [e / m - 1 for e, m in zip(est, meas, strict=True) if m > 0]
    return {
        "total_error": sum(est) / sum(meas) - 1,
        "median_abs_error": statistics.median(abs(x) for x in per),
        "runs": len(per),
    }


def summarize(rows, quick, label, declared_cal, fit, fit_points, threads) -> dict[str, Any]:
    return {
        "quick": quick,
        "device": label,
        "threads": threads,
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
        "note": "FLOPs are the VLM's (cost model); the specialists' (ONNX OCR, layout, YOLO, "
        "CLIP) are counted in seconds only. 'declared' VLM seconds are priced, not run.",
        **totals(rows),
    }


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per policy and accounting: seconds, VLM FLOPs, evidence recall; estimate-vs-measured."""
    n_ev = len(rows)
    measured = {
        p: {
            "seconds": sum(r[p]["seconds"] for r in rows),
            "vlm_flops": sum(r[p]["flops"] for r in rows),
            "evidence_recall": sum(r[p]["evidence"] for r in rows) / n_ev,
            "paths": {b: sum(r[p]["path"] == b for r in rows) for b in ("full", "cascade")},
        }
        for p in POLICIES
    }

    # declared 2B: cost takes the path the 2B-priced route picks; the forced runs give its costs
    def declared(r, p):
        path = r["declared_route"] if p == "cost" else p
        return r[path]

    declared_totals = {
        p: {
            "seconds": sum(declared(r, p)["declared_seconds"] for r in rows),
            "vlm_flops": sum(declared(r, p)["declared_flops"] for r in rows),
            "evidence_recall": sum(declared(r, p)["evidence"] for r in rows) / n_ev,
            "paths": {
                b: sum((r["declared_route"] if p == "cost" else p) == b for r in rows)
                for b in ("full", "cascade")
            },
        }
        for p in POLICIES
    }
    errors = {
        path: _err([r[path]["estimated_s"] for r in rows], [r[path]["seconds"] for r in rows])
        for path in ("cascade", "full")
    }

    def meets(t):
        best_s = min(t["cascade"]["seconds"], t["full"]["seconds"])
        best_f = min(t["cascade"]["vlm_flops"], t["full"]["vlm_flops"])
        best_r = max(t["cascade"]["evidence_recall"], t["full"]["evidence_recall"])
        return {
            "seconds_le_cheaper": t["cost"]["seconds"] <= best_s * 1.0001,
            "flops_le_cheaper": t["cost"]["vlm_flops"] <= best_f * 1.0001,
            "recall_ge_better": t["cost"]["evidence_recall"] >= best_r,
        }

    return {
        "mix": {
            c: sum(r["category"] == c for r in rows)
            for c in dict.fromkeys(r["category"] for r in rows)
        },
        "measured": measured,
        "declared": declared_totals,
        "estimate_vs_measured": errors,
        "must_show": {"measured": meets(measured), "declared": meets(declared_totals)},
        "rows": rows,
    }


def merge(files: list[str]) -> dict[str, Any]:
    """Results of runs over parts of the mix (`--only`), as one: each part's calibration kept."""
    parts = [json.loads(Path(f).read_text()) for f in files]
    meta = [{k: v for k, v in p.items() if k not in ("rows", "mix", "measured", "declared",
             "estimate_vs_measured", "must_show")} for p in parts]  # fmt: skip
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
                f"{secs[i]:.0f} s\nrecall {t[p]['evidence_recall']:.2f}",
                ha="center",
                va="bottom",
                fontsize=8,
            )
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("total seconds")
        ax.set_ylim(0, max(secs) * 1.3)
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
    ap.add_argument(
        "--only",
        action="append",
        default=None,
        help="this category only (repeatable): 'small scan', 'large page', 'image set', 'video'",
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

    result = merge(args.merge) if args.merge else run(args.quick, write, args.limit, args.only)
    if args.merge:
        write(result)
    for key in ("measured", "declared"):
        for p in POLICIES:
            t = result[key][p]
            print(
                f"{key:<9}{p:<8}{t['seconds']:9.1f} s {t['vlm_flops'] / 1e12:9.3f} TFLOP "
                f"recall {t['evidence_recall']:.2f} paths {t['paths']}"
            )
    print(
        json.dumps(
            {
                "estimate_vs_measured": result["estimate_vs_measured"],
                "must_show": result["must_show"],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
