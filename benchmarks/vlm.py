"""VLM runtime benchmark: prefill and end-to-end TTFT vs visual keep ratio for every reduction
method (the `tower` one included), the reduction's own cost, the cost model's prediction, the KV
prefix cache on turn 2 and int8 cache storage.

Runs a tiny VLM built from a real architecture's config (default Qwen2-VL, "bench" size: ~190M-
parameter language model, 8-block vision tower) with RANDOM weights: token counts, FLOPs and
timings are real for the architecture, answers are noise. One image (skimage's astronaut).

Method (benchmarks/vlm_timing.py): torch threads pinned (--threads, default 1, recorded); every
timed figure is the best of --repeats interleaved rounds after one untimed warm-up of every piece
(every shape warmed); the reduction's time is inside the timed prefill and also reported alone;
identity is checked on logits (keep 1.0 vs unreduced, cache hit vs recompute: max |Δ logit|).

- prefill_speedup_vs_full[method][ratio]: reduction + LLM prefill of the whole prompt + last-token
  logits, unreduced over reduced;
- e2e_ttft_speedup_vs_full[method][ratio]: preprocessing + vision tower + reduction + prefill;
- reduction_seconds[method][ratio]: the reduction alone (null for fastv: it ranks inside the
  decoder, so its cost is in its prefill);
- cost_model_max_rel_error: max over configs of |predicted - measured| / measured prefill speedup,
  predicted = cascade.cost prefill FLOPs (causal attention, last-token LM head, FastV's layers);
- reduction_cost_at_4096: each reduction on 4,096 tokens / the reduced prefill after it;
- turn2.speedup_cache, int8 (memory_ratio vs the runtime dtype, memory_ratio_vs_bf16).

    python benchmarks/vlm.py --quick --threads 1 --out benchmarks/results/vlm_quick_cpu
    python benchmarks/vlm.py --threads 1                       # full: 3 ratios, larger image
    python benchmarks/vlm.py --device cuda --out benchmarks/results/vlm_h200
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from vlm_timing import (
    CLOCK,
    WALL,
    Sweep,
    int8_storage,
    prefill_scaling,  # noqa: E402
    reduction_at_4096,
    rounds,
    turn2,
    use_clock,
)

from cascade.artifacts import Image  # noqa: E402
from cascade.provenance import write_results  # noqa: E402
from cascade.vlm import VLM, ReductionConfig, build_tiny_vlm  # noqa: E402

TARGETS = {
    "prefill_speedup_at_0.25": 3.0,
    "e2e_ttft_speedup_at_0.25_tower": 2.0,
    "turn2_cache_speedup": 30.0,
    "cost_model_max_rel_error": 0.15,
    "reduction_cost_at_4096": 0.05,
}
METHODS = ["pool", "divprune", "visionzip", "dart", "fastv", "tower"]


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(0)
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"CPU: {name} ({torch.get_num_threads()} torch threads, {os.cpu_count()} cores)"


def test_image(size: int) -> Image:
    """A natural photo (skimage's astronaut) resized to size x size, or noise without skimage."""
    try:
        from skimage import data

        img = Image(np.ascontiguousarray(data.astronaut()), source="skimage.data.astronaut")
    except ImportError:
        img = Image(
            (np.random.default_rng(0).random((size, size, 3)) * 255).astype(np.uint8),
            source="noise",
        )
    return img.resized(size, size)


def key(red: ReductionConfig) -> str:
    return f"{red.method}@{red.keep_ratio:g}"


def sweep(
    vlm: VLM,
    img: Image,
    question: str,
    methods: list[str],
    ratios: list[float],
    fastv_layer: int,
    repeats: int,
) -> tuple[list[dict], Sweep]:
    full = ReductionConfig()
    configs = [full] + [
        ReductionConfig(m, r, fastv_layer=fastv_layer) for m in methods for r in ratios
    ]
    s = Sweep(vlm, img, question, configs)
    pieces = {"preprocess": s.time_preprocess, "tower/full": s.time_tower}
    for red in configs:
        if red.before_tower:
            pieces[f"tower/{key(red)}"] = lambda red=red: s.time_tower(red)
    for red in configs:
        pieces[f"prefill/{key(red)}"] = lambda red=red: s.prefill(red)[0]
        if red.method != "fastv" and not red.is_identity:
            pieces[f"reduce/{key(red)}"] = lambda red=red: s.time_reduce(red)
    t = rounds(pieces, repeats, "sweep")
    best = {k: min(v) for k, v in t.items()}
    rows = []
    for red in configs:
        vis, n_full = s.tokens(red)
        tower_s = best[f"tower/{key(red)}" if red.before_tower else "tower/full"]
        prefill_s = best[f"prefill/{key(red)}"]
        rows.append(
            {
                "method": red.method,
                "keep_ratio": red.keep_ratio,
                "visual_tokens": vis,
                "visual_tokens_before": sum(e - st for st, e in s.pre.spans),
                "prompt_tokens_before": n_full,
                "preprocess_s": best["preprocess"],
                "tower_s": tower_s,
                "prefill_s": prefill_s,
                "reduction_s": best.get(f"reduce/{key(red)}"),
                "e2e_ttft_s": best["preprocess"] + tower_s + prefill_s,
                "prefill_s_all": t[f"prefill/{key(red)}"],
                "tower_s_all": t[f"tower/{key(red)}" if red.before_tower else "tower/full"],
                "predicted_prefill_flops": s.predicted_prefill_flops(red),
                "predicted_vision_flops": s.predicted_vision_flops(red),
            }
        )
    return rows, s


def by_method(rows: list[dict], value) -> dict:
    return {
        m: {str(r["keep_ratio"]): value(r) for r in rows if r["method"] == m}
        for m in dict.fromkeys(r["method"] for r in rows if r["method"] != "none")
    }


def plot(result: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(17, 4.8))
    rows = result["sweep"]
    base = next(r for r in rows if r["method"] == "none")
    for m in result["config"]["methods"]:
        pts = sorted([base] + [r for r in rows if r["method"] == m], key=lambda r: -r["keep_ratio"])
        x = [r["keep_ratio"] for r in pts]
        (line,) = ax1.plot(x, [r["prefill_s"] for r in pts], "o-", label=m)
        ax1.plot(x, [r["e2e_ttft_s"] for r in pts], "x--", color=line.get_color(), alpha=0.6)
    ax1.set_xlabel("visual keep ratio")
    ax1.set_ylabel("seconds (solid: reduction + prefill; dashed: e2e TTFT)")
    ax1.set_title(
        f"{base['visual_tokens_before']} visual tokens, "
        f"best of {result['config']['repeats']} rounds"
    )
    ax1.invert_xaxis()
    ax1.legend(fontsize=8)
    r25 = [r for r in rows if r["keep_ratio"] == 0.25 or r["method"] == "none"]
    names = [f"{r['method']}@{r['keep_ratio']:g}" for r in r25]
    bottom = np.zeros(len(r25))
    for part, colour in (("preprocess_s", "#999"), ("tower_s", "#c84"), ("prefill_s", "#48c")):
        vals = np.array([r[part] for r in r25])
        ax2.bar(names, vals, bottom=bottom, color=colour, label=part.replace("_s", ""))
        bottom += vals
    ax2.set_ylabel("e2e TTFT, seconds (prefill includes the reduction)")
    ax2.set_title("where TTFT goes at keep 0.25")
    ax2.tick_params(axis="x", rotation=40, labelsize=8)
    ax2.legend(fontsize=8)
    t = result["turn2"]
    bars = {
        "recompute": t["ttft_recompute_s"],
        "prefix cache hit": t["ttft_cache_hit_s"],
        "session turn 2": t["ttft_session_turn2_s"],
    }
    ax3.bar(list(bars), list(bars.values()), color=["#c44", "#4a4", "#48c"])
    ax3.set_yscale("log")
    ax3.set_ylabel("turn-2 TTFT, seconds (log)")
    i8 = result["int8"]
    ax3.set_title(
        f"turn 2: {t['speedup_cache']:.0f}x with the KV prefix cache\nint8 cache: "
        f"{i8['memory_ratio']:.1f}x vs {i8['kv_dtype'].replace('torch.', '')}, "
        f"{i8['memory_ratio_vs_bf16']:.1f}x vs bf16",
        fontsize=10,
    )
    fig.suptitle(
        f"{result['model']} on {result['device']} — random weights: timings real, answers not",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--family", default="qwen2_vl", choices=["qwen2_vl", "qwen2_5_vl", "qwen3_vl"])
    ap.add_argument("--size", default="bench", choices=["test", "bench"])
    ap.add_argument(
        "--quick",
        action="store_true",
        help="keep 0.25 only; generate-TTFT check on `tower` only (full: pool and tower)",
    )
    ap.add_argument(
        "--image-size", type=int, default=None, help="square side in px (896 -> 1024 tokens)"
    )
    ap.add_argument("--identity-image-size", type=int, default=448)
    ap.add_argument("--ratios", type=float, nargs="+", default=None)
    ap.add_argument("--methods", nargs="+", default=METHODS)
    ap.add_argument("--fastv-layer", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="interleaved best-of rounds")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    ap.add_argument(
        "--clock",
        default="auto",
        choices=["auto", "cpu", "wall"],
        help="auto: process CPU time for 1-thread CPU runs (immune to other processes "
        "on a shared machine), wall clock otherwise",
    )
    ap.add_argument(
        "--out", default="benchmarks/results/vlm_cpu", help="output path without suffix"
    )
    args = ap.parse_args(argv)
    if args.clock == "auto":
        args.clock = "cpu" if args.device == "cpu" and args.threads == 1 else "wall"
    use_clock(args.clock)
    args.image_size = args.image_size or 896
    args.ratios = args.ratios or ([0.25] if args.quick else [0.5, 0.25, 0.1])
    if args.threads:
        torch.set_num_threads(args.threads)
    t_start = time.perf_counter()
    path = str(build_tiny_vlm(family=args.family, size=args.size))
    vlm = VLM.load(path, device=args.device)
    img = test_image(args.image_size)
    question = "What is the person in the image holding?"
    print(f"keep-ratio sweep ({torch.get_num_threads()} threads)", flush=True)
    rows, s = sweep(vlm, img, question, args.methods, args.ratios, args.fastv_layer, args.repeats)
    base = next(r for r in rows if r["method"] == "none")
    speed = by_method(rows, lambda r: base["prefill_s"] / r["prefill_s"])
    e2e = by_method(rows, lambda r: base["e2e_ttft_s"] / r["e2e_ttft_s"])
    predicted = by_method(
        rows, lambda r: base["predicted_prefill_flops"] / r["predicted_prefill_flops"]
    )
    errors = {m: {k: abs(predicted[m][k] - v) / v for k, v in d.items()} for m, d in speed.items()}
    predicted_e2e = by_method(
        rows,
        lambda r: (
            (base["predicted_prefill_flops"] + base["predicted_vision_flops"])
            / (r["predicted_prefill_flops"] + r["predicted_vision_flops"])
        ),
    )
    print("identity on logits (own small image: exactness does not depend on size)", flush=True)
    small = test_image(args.identity_image_size)
    identity = {
        "image_size": args.identity_image_size,
        **Sweep(vlm, small, question, [ReductionConfig(m, 0.25) for m in args.methods]).identity(),
    }
    print("reduction cost at 4096 tokens", flush=True)
    r4096 = reduction_at_4096(
        s,
        [m for m in args.methods if m != "fastv"],
        0.25,
        args.repeats,
        known_prefill=(base["prompt_tokens_before"], base["prefill_s"]),
    )
    scaling = None
    if not args.quick:
        print("prefill seconds vs prompt length (what the FLOP count leaves out)", flush=True)
        lengths = sorted(
            {
                1,
                32,
                *(
                    r["prompt_tokens_before"] - r["visual_tokens_before"] + r["visual_tokens"]
                    for r in rows
                    if r["method"] == "pool"
                ),
                base["prompt_tokens_before"],
            }
        )
        scaling = prefill_scaling(s, lengths, args.repeats)
    print("turn 2 with the KV prefix cache, and generate TTFT", flush=True)
    gen_methods = ["tower"] if args.quick else ["pool", "tower"]
    t2, gen, cached = turn2(
        path,
        args.device,
        img,
        question,
        args.repeats,
        [ReductionConfig(m, 0.25) for m in gen_methods if m in args.methods],
    )
    print("int8 cache storage", flush=True)
    i8 = int8_storage(path, args.device, img, cached)
    meta = json.loads((Path(path) / "tiny_vlm.json").read_text())
    at25 = {m: v.get("0.25") for m, v in speed.items()}
    max_err = max(e for d in errors.values() for e in d.values())
    worst_4096 = max(v["ratio_to_reduced_prefill"] for v in r4096["methods"].values())
    result = {
        "benchmark": "vlm runtime",
        "device": device_name(args.device),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "clock": {
            "cpu": "process CPU seconds (time.process_time): one thread's compute time, "
            "excluding time other processes hold the core",
            "wall": "wall-clock seconds (time.perf_counter)",
        }[CLOCK["kind"]],
        "command": "python benchmarks/vlm.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "model": f"tiny {args.family} '{args.size}' ({meta['parameters'] / 1e6:.0f}M parameters)",
        "note": "RANDOM weights: visual token counts, FLOPs and timings are real for the "
        "architecture; generated answers are meaningless. Timings: best of interleaved rounds.",
        "config": {**vars(args), "image": img.source, "question": question},
        "sweep": rows,
        "prefill_speedup_vs_full": speed,
        "e2e_ttft_speedup_vs_full": e2e,
        "reduction_seconds": by_method(rows, lambda r: r["reduction_s"]),
        "predicted_prefill_speedup": predicted,
        "cost_model_rel_error": errors,
        "cost_model_max_rel_error": max_err,
        "predicted_e2e_flops_speedup": predicted_e2e,
        "generate_ttft_s": gen,
        "generate_ttft_speedup_vs_full": {k: gen["none@1"] / v for k, v in gen.items()},
        "identity": identity,
        "reduction_cost_at_4096": r4096,
        "prefill_scaling": scaling,
        "turn2": t2,
        "int8": i8,
        "targets": {
            "prefill_speedup_at_0.25": {
                "target": TARGETS["prefill_speedup_at_0.25"],
                "measured": at25,
            },
            "e2e_ttft_speedup_at_0.25_tower": {
                "target": TARGETS["e2e_ttft_speedup_at_0.25_tower"],
                "measured": e2e.get("tower", {}).get("0.25"),
            },
            "turn2_cache_speedup": {
                "target": TARGETS["turn2_cache_speedup"],
                "measured": t2["speedup_cache"],
            },
            "cost_model_max_rel_error": {
                "target": TARGETS["cost_model_max_rel_error"],
                "measured": max_err,
            },
            "reduction_cost_at_4096": {
                "target": TARGETS["reduction_cost_at_4096"],
                "measured": worst_4096,
            },
        },
        "wall_clock_best_s": {
            label: {k: min(v) for k, v in d.items()} for label, d in WALL.items()
        },
        "wall_s": time.perf_counter() - t_start,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_results(out.with_suffix(".json"), result)
    plot(result, out.with_suffix(".png"))
    print(
        "prefill speedup at keep 0.25: " + ", ".join(f"{m} {v:.2f}x" for m, v in at25.items() if v)
    )
    print(
        "e2e TTFT speedup at keep 0.25: "
        + ", ".join(f"{m} {v.get('0.25', 0):.2f}x" for m, v in e2e.items())
    )
    print(
        f"cost model max rel. error {max_err:.3f}; turn 2 {t2['speedup_cache']:.0f}x; "
        f"reduction at 4096 <= {worst_4096:.3f} of the reduced prefill"
    )
    print(
        f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')} "
        f"in {result['wall_s']:.0f} s"
    )
    return result


if __name__ == "__main__":
    main()
