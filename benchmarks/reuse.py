"""Work done once, reused: follow-up TTFT with the encoder cache and the block prefix cache (exact),
and with position-independent image KV (opt-in), against prefix-only caching.

Scenarios: a first request, then the timed follow-up (every cache emptied before the first):

- append: [A, B] -> [A, B, C];  reorder: [A, B, C] -> [C, A, B];  subset: [A, B, C] -> [B];
- system: [A, B] under one system prompt -> the same images under another;
- video: three questions on one video, each on the frames its retrieval picked (frames 0-3, then
  2-5, then 1, 3, 5, 6); the timed follow-ups are questions 2 and 3.

Modes (each its own loaded model):

- prefix_only: a KV cache keyed by the whole prefix, the cache before blocks. It misses on every
  follow-up above (their prefixes differ from the first request's), so its follow-up is a cold
  run: measured as one, with the encoder and KV caches off (the tower on every image, the whole
  prefill).
- exact: the encoder cache and the block prefix cache (the defaults; tokens and logits are those
  of a cold run).
- blended: exact + position-independent image KV (`kv_position_independent`, k leading visual
  tokens of each moved image recomputed).

Per scenario and mode: the follow-up's TTFT (`bill.ttft_s`: preprocessing, tower, reduction and
prefill up to the first token), best of interleaved rounds after an untimed warm-up round; tower
images, cached tokens, the cache outcome. Identity, against a cold full recompute of the same
follow-up: max |Δ| of the first token's logits, top-1 agreement, greedy tokens equal. Torch
threads are pinned (default 1) and recorded. The tiny VLM has RANDOM weights: token counts and
timings are the architecture's, answers are noise.

    python benchmarks/reuse.py --quick       # tiny "test" model, 1 timed round: proves it runs
    python benchmarks/reuse.py               # tiny "bench" model (~200M LLM), 3 rounds
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from cascade.artifacts import Image  # noqa: E402
from cascade.provenance import write_results  # noqa: E402
from cascade.vlm import VLM, ReductionConfig, build_tiny_vlm  # noqa: E402

MODES = ("prefix_only", "exact", "blended")
QUESTIONS = ("What is in the picture?", "What colour is the bus?", "How many people are there?")


def frames(n: int, size: int, seed: int = 0) -> list[Image]:
    """n distinct frames (random pixels: the tower's cost does not depend on what they show)."""
    rng = np.random.default_rng(seed)
    return [
        Image((rng.random((size, size, 3)) * 255).astype(np.uint8), source=f"frame{i}")
        for i in range(n)
    ]


def scenarios(size: int) -> dict[str, tuple[list[tuple], list[tuple]]]:
    """name -> (setup requests, timed follow-ups); a request is (images, question, system)."""
    a, b, c = frames(3, size, seed=1)
    v = frames(7, size, seed=2)
    q0, q1, q2 = QUESTIONS
    return {
        "append": ([([a, b], q0, None)], [([a, b, c], q0, None)]),
        "reorder": ([([a, b, c], q0, None)], [([c, a, b], q0, None)]),
        "subset": ([([a, b, c], q0, None)], [([b], q0, None)]),
        "system": (
            [([a, b], q0, "You are a careful assistant.")],
            [([a, b], q0, "Answer in one word.")],
        ),
        "video": ([(v[0:4], q0, None)], [(v[2:6], q1, None), ([v[1], v[3], v[5], v[6]], q2, None)]),
    }


def load(path: str, mode: str, k: int) -> VLM:
    if mode == "prefix_only":
        return VLM.load(path, device="cpu", encoder_cache_bytes=0)
    return VLM.load(
        path,
        device="cpu",
        kv_cache_bytes=4 << 30,
        kv_position_independent=mode == "blended",
        kv_recompute_image_tokens=k,
    )


def clear(vlm: VLM) -> None:
    for cache in (vlm.kv_cache, vlm.backend.encoder_cache):
        if cache is not None:
            cache.clear()


def first_logits(vlm: VLM, images: list, question: str, system: str | None) -> torch.Tensor:
    """The first answer token's logits, through the runtime's own prefix path."""
    b = vlm.backend
    prefix, suffix = b.layout.first_turn(len(images), system, question)
    state, *_ = b.engine.state(images, prefix, ReductionConfig())
    hidden = b.engine.prefill(b.engine.cache_of(state), state.next_pos, b.layout.tokenize(suffix))
    with torch.inference_mode():
        return b.runtime.lm_head(hidden[0, -1]).float()


def follow_ups(vlm: VLM, setup: list, timed: list, run) -> list:
    """Empty the caches, send the setup requests, then `run(request)` each follow-up in turn."""
    clear(vlm)
    for images, q, system in setup:
        vlm.generate(images, q, max_new_tokens=1, system_prompt=system)
    return [run(req) for req in timed]  # in order: a later follow-up comes after the earlier ones


def measure(models: dict[str, VLM], cases: dict, rounds: int, n_tokens: int) -> dict:
    ttft = {s: {m: [[] for _ in cases[s][1]] for m in models} for s in cases}
    facts: dict = {s: {} for s in cases}
    for r in range(rounds + 1):  # round 0 warms every shape, untimed
        for s, (setup, timed) in cases.items():
            for m, vlm in models.items():
                res = follow_ups(
                    vlm,
                    setup,
                    timed,
                    lambda req, vlm=vlm: vlm.generate(
                        req[0], req[1], max_new_tokens=1, system_prompt=req[2]
                    ),
                )
                if r:
                    for i, x in enumerate(res):
                        ttft[s][m][i].append(x.bill.ttft_s)
                facts[s][m] = [
                    {
                        "cache": x.bill.cache,
                        "images_encoded": x.bill.images_encoded,
                        "images_cached": x.bill.images_cached,
                        "cached_tokens": x.bill.cached_tokens,
                        "input_tokens": x.bill.input_tokens,
                        "computed_prefill_flops": x.bill.computed_prefill_flops,
                        "computed_vision_flops": x.bill.computed_vision_flops,
                    }
                    for x in res
                ]
        if r:
            print(f"  round {r}/{rounds} done", flush=True)
    cold = models["prefix_only"]
    out: dict = {}
    for s, (setup, timed) in cases.items():
        ref_logits = [first_logits(cold, *req) for req in timed]
        ref_tokens = [
            cold.generate(req[0], req[1], max_new_tokens=n_tokens, system_prompt=req[2]).token_ids
            for req in timed
        ]
        row: dict = {}
        for m, vlm in models.items():
            logits = follow_ups(vlm, setup, timed, lambda req, vlm=vlm: first_logits(vlm, *req))
            tokens = follow_ups(
                vlm,
                setup,
                timed,
                lambda req, vlm=vlm: (
                    vlm.generate(
                        req[0], req[1], max_new_tokens=n_tokens, system_prompt=req[2]
                    ).token_ids
                ),
            )
            best = [min(t) for t in ttft[s][m]]
            row[m] = {
                "ttft_s": best,
                "ttft_s_rounds": ttft[s][m],
                "follow_ups": facts[s][m],
                "max_abs_logit_delta": [
                    float((x - y).abs().max()) for x, y in zip(logits, ref_logits, strict=True)
                ],
                "top1_agree": [
                    int(x.argmax()) == int(y.argmax())
                    for x, y in zip(logits, ref_logits, strict=True)
                ],
                "greedy_tokens_equal": [x == y for x, y in zip(tokens, ref_tokens, strict=True)],
            }
        for m in ("exact", "blended"):
            row[m]["ttft_speedup_vs_prefix_only"] = [
                p / max(t, 1e-9)
                for p, t in zip(row["prefix_only"]["ttft_s"], row[m]["ttft_s"], strict=True)
            ]
        out[s] = row
    return out


def drift(result: dict) -> dict:
    """The blended mode against a full recompute over every follow-up of every scenario, and what
    each mode computed of the prefill and the tower against prefix-only caching (cost-model FLOPs
    from the bills: the cost saved)."""
    rows = [
        (d, t, g)
        for r in result.values()
        for d, t, g in zip(
            r["blended"]["max_abs_logit_delta"],
            r["blended"]["top1_agree"],
            r["blended"]["greedy_tokens_equal"],
            strict=True,
        )
    ]

    def total(mode: str, field: str) -> float:
        return sum(f[field] for r in result.values() for f in r[mode]["follow_ups"])

    return {
        "prompts": len(rows),
        "max_abs_logit_delta": max(d for d, _, _ in rows),
        "top1_agreement": sum(t for _, t, _ in rows) / len(rows),
        "greedy_tokens_equal": sum(g for _, _, g in rows) / len(rows),
        "computed_share_vs_prefix_only": {
            m: {
                "prefill_flops": total(m, "computed_prefill_flops")
                / total("prefix_only", "computed_prefill_flops"),
                "vision_flops": total(m, "computed_vision_flops")
                / total("prefix_only", "computed_vision_flops"),
            }
            for m in ("exact", "blended")
        },
    }


def plot(result: dict, out: Path) -> None:
    from matplotlib.figure import Figure

    names = [
        (s, i) for s, r in result["scenarios"].items() for i in range(len(r["exact"]["ttft_s"]))
    ]
    fig = Figure(figsize=(9, 4))
    ax = fig.subplots()
    width = 0.27
    for j, m in enumerate(MODES):
        ax.bar(
            [i + (j - 1) * width for i in range(len(names))],
            [result["scenarios"][s][m]["ttft_s"][i] * 1e3 for s, i in names],
            width,
            label=m,
        )
    ax.set_xticks(
        range(len(names)), [f"{s}" + (f" q{i + 2}" if s == "video" else "") for s, i in names]
    )
    ax.set_ylabel("follow-up TTFT (ms)")
    ax.set_title(f"follow-up TTFT by caching ({result['model']}; {result['machine']})", fontsize=8)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=120)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--quick", action="store_true", help="tiny 'test' model, small frames, 1 timed round"
    )
    ap.add_argument(
        "--rounds", type=int, default=None, help="timed interleaved rounds (default 3, quick 1)"
    )
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument(
        "--recompute",
        type=int,
        default=16,
        help="blended mode: leading visual tokens of a moved image recomputed (default 16)",
    )
    ap.add_argument("--tokens", type=int, default=8, help="greedy tokens compared with a cold run")
    ap.add_argument(
        "--machine",
        default="shared machine",
        help="recorded with the figures (timings from a shared machine are not for the README)",
    )
    ap.add_argument("--out", default=None, help="output path without suffix")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    rounds = args.rounds or (1 if args.quick else 3)
    size, side = ("test", 224) if args.quick else ("bench", 448)
    k = min(args.recompute, 4) if args.quick else args.recompute
    t0 = time.perf_counter()
    path = str(build_tiny_vlm(family="qwen2_vl", size=size))
    models = {m: load(path, m, k) for m in MODES}
    scen = measure(models, scenarios(side), rounds, args.tokens)
    result = {
        "benchmark": "reuse: follow-up TTFT with the encoder + block prefix caches and "
        "position-independent KV",
        "command": "python benchmarks/reuse.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "model": f"tiny Qwen2-VL '{size}' (RANDOM weights)",
        "frame_px": side,
        "visual_tokens_per_frame": models["exact"].family.image_cost(side, side).tokens,
        "threads": torch.get_num_threads(),
        "rounds": rounds,
        "recompute_image_tokens": k,
        "machine": args.machine,
        "device": "cpu",
        "prefix_only": "a whole-prefix KV cache misses on every follow-up here; timed as the cold "
        "run it is (encoder and KV caches off)",
        "scenarios": scen,
        "summary": drift(scen),
    }
    result["wall_s"] = time.perf_counter() - t0
    out = Path(args.out or f"benchmarks/results/reuse{'_quick' if args.quick else ''}_cpu")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_results(out.with_suffix(".json"), result)
    plot(result, out)
    for s, r in scen.items():
        print(
            f"{s:8s} "
            + "  ".join(f"{m} {1e3 * min(r[m]['ttft_s']):.1f} ms" for m in MODES)
            + "  | exact Δ "
            + ", ".join(f"{d:.1e}" for d in r["exact"]["max_abs_logit_delta"])
            + "  blended Δ "
            + ", ".join(f"{d:.1e}" for d in r["blended"]["max_abs_logit_delta"])
        )
    print(f"summary: {result['summary']}")
    print(f"wrote {out.with_suffix('.json')} in {result['wall_s']:.0f} s ({args.machine})")
    return result


if __name__ == "__main__":
    main()
