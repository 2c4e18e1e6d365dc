"""VLM runtime benchmark: prefill/TTFT vs visual keep ratio, KV prefix cache, int8 cache storage.

Runs the "bench" tiny VLM (real Qwen2-VL architecture, ~190M-parameter language model, RANDOM
weights: timings and token counts are real for the architecture, answers are noise) on one image
of ~1,000 merged visual tokens and records, in one process:

1. prefill seconds (best of --repeats, whole prompt in one chunk) and TTFT for keep ratios (1.0, 0.5, 0.25, 0.1) of every reduction method;
2. turn-2 TTFT with the KV prefix cache vs recomputing the prefix (and inside a session);
3. prefix-cache memory with fp vs int8 storage, the int8 KV error and its effect on the answer.

Writes <out>.json and <out>.png (default benchmarks/results/vlm_cpu). Example:

    python benchmarks/vlm.py --threads 2
    python benchmarks/vlm.py --device cuda --out benchmarks/results/vlm_h200
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from cascade.artifacts import Image  # noqa: E402
from cascade.vlm import VLM, KVPrefixCache, ReductionConfig, build_tiny_vlm  # noqa: E402
from cascade.vlm.kv_cache import dequantize_kv, quantize_kv  # noqa: E402

TARGETS = {"prefill_speedup_at_0.25": 2.5, "turn2_cache_speedup": 20.0}


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(0)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"CPU: {line.split(':', 1)[1].strip()} ({torch.get_num_threads()} threads)"
    except OSError:
        pass
    return f"CPU: {platform.processor() or platform.machine()} ({torch.get_num_threads()} threads)"


def test_image(size: int) -> Image:
    """A natural photo (skimage's astronaut) resized to size x size, or noise without skimage."""
    try:
        from skimage import data

        img = Image(np.ascontiguousarray(data.astronaut()), source="skimage.data.astronaut")
    except ImportError:
        img = Image((np.random.default_rng(0).random((size, size, 3)) * 255).astype(np.uint8))
    return img.resized(size, size)


class PrefillCase:
    """One reduction config's whole prompt (reduced prefix + question), embedded once so the
    timed part is the LLM prefill alone."""

    def __init__(self, vlm: VLM, img: Image, question: str, red: ReductionConfig):
        from cascade.vlm.reduction import keep_count

        b = self.backend = vlm.backend
        fam = b.family
        self.red = red
        prefix, suffix = b.layout.first_turn(1, None, question)
        sfx = b.layout.tokenize(suffix)
        self.fastv = red.method == "fastv"
        a = b.engine.assemble([img], prefix, ReductionConfig() if self.fastv else red)
        with torch.inference_mode():
            self.emb = torch.cat([a.embeds, fam.embed(torch.tensor(sfx, device=b.device))])[None]
        self.pos = torch.cat([a.positions, fam.text_positions(a.next_pos, len(sfx))], dim=1)
        self.visual = (a.ids == fam.image_token_id).nonzero().squeeze(1)
        self.extra, self.prefix = a.extra, a
        self.keep = keep_count(a.unreduced, red.keep_ratio)
        self.times: list[float] = []

    def run(self) -> None:
        from cascade.vlm.fastv import fastv_prefill

        fam = self.backend.family
        cache = self.backend.engine.new_cache()
        visual = {} if self.extra is None else fam.visual_kwargs(
            torch.nn.functional.pad(self.prefix.ids == fam.image_token_id,
                                    (0, self.emb.shape[1] - self.prefix.ids.numel()))[None], self.extra)
        t = time.perf_counter()
        with torch.inference_mode():
            if self.fastv:
                h, _ = fastv_prefill(fam, self.emb, self.pos, self.visual, self.keep,
                                     self.red.fastv_layer, cache, self.extra)
            else:
                h = fam.forward(self.emb, self.pos, cache, **visual)
            int(fam.lm_head(h[:, -1]).argmax())
        self.times.append(time.perf_counter() - t)


def sweep(vlm: VLM, img: Image, question: str, methods: list[str], ratios: list[float],
          max_new: int, fastv_layer: int, repeats: int) -> list[dict]:
    """TTFT from one end-to-end generate per config; prefill seconds as the best of `repeats`
    rounds, each round timing every config once (interleaved, so load from other processes on a
    shared machine hits all configs alike and best-of filters it out)."""
    configs = [ReductionConfig(m, r, fastv_layer=fastv_layer)
               for m in ["none"] + methods for r in ([1.0] if m == "none" else [x for x in ratios if x < 1.0])]
    results, cases = [], []
    for red in configs:
        r = vlm.generate([img], question, max_new_tokens=max_new, reduction=red)
        results.append(r)
        cases.append(PrefillCase(vlm, img, question, red))
        print(f"  {red.method:9s} keep {red.keep_ratio:4.2f}: {r.bill.visual_tokens:5d} visual tokens, "
              f"TTFT {r.bill.ttft_s:6.3f} s (vision {r.bill.vision_s:.3f} s)", flush=True)
    for i in range(repeats):
        for case in cases:
            case.run()
        print(f"  prefill round {i + 1}/{repeats}: " + ", ".join(
            f"{c.red.method}@{c.red.keep_ratio:g} {c.times[-1]:.2f}s" for c in cases), flush=True)
    return [{"method": red.method, "keep_ratio": red.keep_ratio, "visual_tokens": r.bill.visual_tokens,
             "visual_tokens_before": r.bill.unreduced_visual_tokens, "prompt_tokens": r.bill.prompt_tokens,
             "prefill_s": min(c.times), "prefill_s_all": c.times, "ttft_s": r.bill.ttft_s,
             "vision_s": r.bill.vision_s, "prefill_flops": r.bill.prefill_flops,
             "baseline_prefill_flops": r.bill.unreduced_prefill_flops}
            for red, r, c in zip(configs, results, cases)]


def turn2(path: str, device: str, img: Image, max_new: int, repeats: int) -> dict:
    """Turn-2 TTFT: prefix-cache hit and session turn vs recomputing everything (best-of)."""
    cached = VLM.load(path, device=device, kv_cache_bytes=4 << 30)
    plain = VLM.load(path, device=device)
    q1 = "What is in the image?"
    q2s = ["What colour is the suit?", "Is it day or night?", "What is behind the person?",
           "How many flags are there?", "Where was this taken?"][:max(repeats, 1)]
    cached.generate([img], q1, max_new_tokens=max_new)
    # Each path runs once unmeasured first: on CPU, oneDNN builds kernels per input shape, and
    # every question length is a new shape; a first call pays that, a serving process does not.
    for q in q2s:
        cached.generate([img], q, max_new_tokens=max_new)
    hits = [cached.generate([img], q, max_new_tokens=max_new) for q in q2s]
    plain.generate([img], q2s[0], max_new_tokens=max_new)
    recomputes = [plain.generate([img], q, max_new_tokens=max_new) for q in q2s[:2]]
    warm = plain.session([img], max_new_tokens=max_new)
    warm.ask(q1), warm.ask(q2s[0])
    s = plain.session([img], max_new_tokens=max_new)
    s.ask(q1)
    st2 = s.ask(q2s[0])
    assert all(h.bill.cache == "hit" for h in hits)
    same = all(h.token_ids == r.token_ids for h, r in zip(hits, recomputes))
    hit_s = min(h.bill.ttft_s for h in hits)
    rec_s = min(r.bill.ttft_s for r in recomputes)
    out = {"visual_tokens": hits[0].bill.visual_tokens, "ttft_cache_hit_s": hit_s,
           "ttft_recompute_s": rec_s, "ttft_session_turn2_s": st2.bill.ttft_s,
           "speedup_cache": rec_s / hit_s, "speedup_session": rec_s / st2.bill.ttft_s,
           "same_tokens_hit_vs_recompute": same,
           "session_vision_tower_calls_after_2_turns": s.vision_tower_calls}
    print(f"  turn 2 TTFT: cache hit {hit_s:.3f} s, session {st2.bill.ttft_s:.3f} s, "
          f"recompute {rec_s:.3f} s -> {out['speedup_cache']:.0f}x (same tokens: {same})", flush=True)
    return out


def int8_storage(path: str, device: str, img: Image, max_new: int) -> dict:
    fp = VLM.load(path, device=device, kv_cache_bytes=4 << 30)
    q = VLM.load(path, device=device, kv_cache=KVPrefixCache(4 << 30, int8=True))
    question = "Describe the image."
    for v in (fp, q):
        v.generate([img], question, max_new_tokens=1)  # fill the cache
    a = fp.generate([img], question, max_new_tokens=max_new)
    b = q.generate([img], question, max_new_tokens=max_new)
    prefix, _ = fp.backend.layout.first_turn(1, None, question)
    state, _, _ = fp.backend.engine.compute([img], prefix, ReductionConfig())
    errs = []
    for k, v in state.layers:
        dk, dv = dequantize_kv(quantize_kv(k, v))
        errs.append(((dk - k).norm() / k.norm()).item())
        errs.append(((dv - v).norm() / v.norm()).item())
    agree = sum(x == y for x, y in zip(a.token_ids, b.token_ids)) / max(len(a.token_ids), 1)
    out = {"fp_bytes": fp.kv_cache.bytes, "int8_bytes": q.kv_cache.bytes,
           "memory_ratio": fp.kv_cache.bytes / q.kv_cache.bytes,
           "kv_relative_error_mean": float(np.mean(errs)), "kv_relative_error_max": float(np.max(errs)),
           "greedy_token_agreement": agree, "kv_dtype": str(state.layers[0][0].dtype)}
    print(f"  KV cache: fp {out['fp_bytes'] / 2**20:.1f} MiB, int8 {out['int8_bytes'] / 2**20:.1f} MiB "
          f"({out['memory_ratio']:.2f}x), rel. error {out['kv_relative_error_mean']:.4f}, "
          f"token agreement {agree:.2f}", flush=True)
    return out


def plot(result: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    rows = result["sweep"]
    base = next(r for r in rows if r["method"] == "none")
    for m in result["config"]["methods"]:
        pts = [base] + [r for r in rows if r["method"] == m]
        pts.sort(key=lambda r: -r["keep_ratio"])
        line, = ax1.plot([r["keep_ratio"] for r in pts], [r["prefill_s"] for r in pts], "o-", label=f"{m} prefill")
        ax1.plot([r["keep_ratio"] for r in pts], [r["ttft_s"] for r in pts], "x--", color=line.get_color(), alpha=0.5)
    ax1.set_xlabel("visual keep ratio")
    ax1.set_ylabel("seconds (solid: prefill, dashed: TTFT)")
    ax1.set_title(f"prefill vs keep ratio ({base['visual_tokens_before']} visual tokens)")
    ax1.invert_xaxis()
    ax1.legend(fontsize=8)
    t = result["turn2"]
    bars = {"recompute": t["ttft_recompute_s"], "prefix cache hit": t["ttft_cache_hit_s"],
            "session turn 2": t["ttft_session_turn2_s"]}
    ax2.bar(list(bars), list(bars.values()), color=["#c44", "#4a4", "#48c"])
    ax2.set_yscale("log")
    ax2.set_ylabel("turn-2 TTFT, seconds (log)")
    i8 = result["int8"]
    ax2.set_title(f"turn 2: {t['speedup_cache']:.0f}x faster with the KV prefix cache\n"
                  f"int8 cache: {i8['memory_ratio']:.1f}x smaller, rel. KV error "
                  f"{i8['kv_relative_error_mean']:.3f}", fontsize=10)
    fig.suptitle(f"{result['model']} on {result['device']} — random weights: timings real, answers not",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", default="qwen2_vl", choices=["qwen2_vl", "qwen2_5_vl", "qwen3_vl"])
    ap.add_argument("--size", default="bench", choices=["test", "bench"])
    ap.add_argument("--image-size", type=int, default=896,
                    help="square image side in pixels (896 -> 1024 merged visual tokens)")
    ap.add_argument("--ratios", type=float, nargs="+", default=[1.0, 0.5, 0.25, 0.1])
    ap.add_argument("--methods", nargs="+", default=["pool", "divprune", "visionzip", "dart", "fastv"])
    ap.add_argument("--fastv-layer", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3, help="best-of repeats for timings")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch default)")
    ap.add_argument("--out", default="benchmarks/results/vlm_cpu", help="output path without suffix")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    t_start = time.perf_counter()
    path = str(build_tiny_vlm(family=args.family, size=args.size))
    vlm = VLM.load(path, device=args.device)
    img = test_image(args.image_size)
    question = "What is the person in the image holding?"
    print("warm-up", flush=True)
    for red in (ReductionConfig(), ReductionConfig("pool", 0.25)):
        vlm.generate([img], question, max_new_tokens=2, reduction=red)
    print("keep-ratio sweep", flush=True)
    rows = sweep(vlm, img, question, args.methods, args.ratios, args.max_new_tokens,
                 args.fastv_layer, args.repeats)
    base = next(r for r in rows if r["method"] == "none")
    speed = {m: {str(r["keep_ratio"]): base["prefill_s"] / r["prefill_s"] for r in rows if r["method"] == m}
             for m in args.methods}
    ttft_speed = {m: {str(r["keep_ratio"]): base["ttft_s"] / r["ttft_s"] for r in rows if r["method"] == m}
                  for m in args.methods}
    print("turn 2 with the KV prefix cache", flush=True)
    t2 = turn2(path, args.device, img, args.max_new_tokens, args.repeats)
    print("int8 cache storage", flush=True)
    i8 = int8_storage(path, args.device, img, args.max_new_tokens)
    meta = json.loads((Path(path) / "tiny_vlm.json").read_text())
    at25 = {m: s.get("0.25") for m, s in speed.items()}
    result = {
        "benchmark": "vlm runtime", "device": device_name(args.device), "torch": torch.__version__,
        "model": f"tiny {args.family} '{args.size}' ({meta['parameters'] / 1e6:.0f}M parameters)",
        "note": "RANDOM weights: visual token counts, FLOPs and timings are real for the "
                "architecture; generated answers are meaningless.",
        "config": {**vars(args), "image": img.source, "question": question},
        "sweep": rows, "prefill_speedup_vs_full": speed, "ttft_speedup_vs_full": ttft_speed,
        "turn2": t2, "int8": i8,
        "targets": {
            "prefill_speedup_at_0.25": {"target": TARGETS["prefill_speedup_at_0.25"], "measured": at25,
                                        "met": {m: (v or 0) >= TARGETS["prefill_speedup_at_0.25"]
                                                for m, v in at25.items()}},
            "turn2_cache_speedup": {"target": TARGETS["turn2_cache_speedup"],
                                    "measured": t2["speedup_cache"],
                                    "met": t2["speedup_cache"] >= TARGETS["turn2_cache_speedup"]}},
        "wall_s": time.perf_counter() - t_start,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=2))
    plot(result, out.with_suffix(".png"))
    print(f"prefill speedup at keep 0.25: " + ", ".join(f"{m} {v:.1f}x" for m, v in at25.items() if v))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')} in {result['wall_s']:.0f} s")
    return result


if __name__ == "__main__":
    main()
