"""KV presses and int4 KV on CPU: bytes, decode step time and turn-2 time to first token against
the context length.

Model: the "bench" tiny Qwen2-VL (random weights; its language model has 12 layers, 16 query / 4
KV heads of 64, ~200M parameters, fp32 on CPU). For each context of N visual tokens (+ 64 text
tokens: system prompt and template) the prefix KV is synthetic (random keys and values of the
right shape: prefilling 16k visual tokens of a 200M model on one shared CPU thread would take
minutes per run, and neither the step time nor the bytes depend on the values); the press is the
runtime's own (`press_block`, `snapkv_visual` at keep 0.2, its window queries random), timed as
overhead. Then, unpressed against pressed (interleaved, best of --rounds, every shape warmed):

- KV bytes: unpressed, pressed, int8 and int4 (KIVI g64 r32) prefix-cache entries, and int4 of the
  pressed KV, as fractions of the same KV in bf16 (a GPU's dtype; fp32 here is twice that);
- decode step: one token through the model's forward against the cache (transformers'
  DynamicCache, which copies the KV on append: part of this runtime's real step);
- turn-2 TTFT: a 24-token second-turn question prefilled against the cache and its first token's
  logits (what `Session.ask` does on turn 2: no tower, no prefix prefill).

    python benchmarks/kv.py --quick      # 1k / 4k / 16k, 3 rounds
    python benchmarks/kv.py              # + 8k, 5 rounds
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from cascade.kernels.kv_int4 import quantize_kv_int4  # noqa: E402
from cascade.kernels.kv_quant import quantize_kv  # noqa: E402
from cascade.provenance import write_results  # noqa: E402
from cascade.vlm import VLM, build_tiny_vlm  # noqa: E402
from cascade.vlm.kv_cache import new_dynamic_cache  # noqa: E402
from cascade.vlm.press import KVConfig, press_block  # noqa: E402

TEXT = 64
QUESTION = 24


def synthetic_prefix(layers: int, heads: int, head_dim: int, n_visual: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    n = TEXT + n_visual
    kv = [
        (
            torch.randn(1, heads, n, head_dim, generator=g),
            torch.randn(1, heads, n, head_dim, generator=g),
        )
        for _ in range(layers)
    ]
    visual = torch.zeros(n, dtype=torch.bool)
    visual[TEXT // 2 : TEXT // 2 + n_visual] = True  # text before and after the image, as a prompt
    return kv, visual


def nbytes(layers) -> int:
    return sum(t.numel() * t.element_size() for kv in layers for t in kv)


def decode_step(rt, layers, pos: int) -> float:
    cache = new_dynamic_cache(rt.text_config, layers)
    feed = rt.embed(torch.tensor([[7]]))
    positions = torch.tensor([pos]).view(1, 1, 1).expand(rt.position_rows, 1, 1)
    t = time.perf_counter()
    with torch.inference_mode():
        h = rt.forward(feed, positions, cache)
        rt.lm_head(h[:, -1])
    return time.perf_counter() - t


def turn_two(engine, rt, layers, pos: int) -> float:
    cache = new_dynamic_cache(rt.text_config, layers)
    ids = list(range(100, 100 + QUESTION))
    t = time.perf_counter()
    with torch.inference_mode():
        h = engine.prefill(cache, pos, ids)
        rt.lm_head(h[:, -1])
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--keep", type=float, default=0.2)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    sizes = (1024, 4096, 16384) if a.quick else (1024, 4096, 8192, 16384)
    rounds = a.rounds or (3 if a.quick else 5)
    vlm = VLM.load(
        str(build_tiny_vlm(family="qwen2_vl", size="bench")), device="cpu", encoder_cache_bytes=0
    )
    b = vlm.backend
    rt, cfg = b.runtime, b.family.text_config
    L, H = cfg.num_hidden_layers, cfg.num_key_value_heads
    D = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    HQ = cfg.num_attention_heads
    press = KVConfig(press="snapkv_visual", keep=a.keep)
    rows = []
    for n_vis in sizes:
        layers, visual = synthetic_prefix(L, H, D, n_vis)
        n = TEXT + n_vis
        queries = [(torch.randn(1, HQ, press.window, D), D**-0.5) for _ in range(L)]
        press_s = []
        for _ in range(rounds):
            t = time.perf_counter()
            pressed = press_block(press, layers, visual, queries)
            press_s.append(time.perf_counter() - t)
        bf16 = nbytes(layers) // 2  # the same KV in bf16
        int8 = quantize_kv([k for k, _ in layers], [v for _, v in layers], impl="torch").nbytes * 1
        bf = [(k.bfloat16(), v.bfloat16()) for k, v in layers]
        int4 = sum(quantize_kv_int4(k, v, 64, 32).nbytes for k, v in bf)
        int4_pressed = sum(
            quantize_kv_int4(k.bfloat16(), v.bfloat16(), 64, 32).nbytes for k, v in pressed
        )
        # int8 of fp32 KV has fp32 scales: against bf16 KV the scales would be the same count
        kept = pressed[0][0].shape[2]
        timing = {
            "decode_unpressed": [],
            "decode_pressed": [],
            "ttft2_unpressed": [],
            "ttft2_pressed": [],
        }
        decode_step(rt, layers, n)  # warm both shapes
        decode_step(rt, pressed, n)
        turn_two(b.engine, rt, layers, n)
        turn_two(b.engine, rt, pressed, n)
        for _ in range(rounds):  # interleaved: unpressed, pressed, unpressed, ...
            timing["decode_unpressed"].append(decode_step(rt, layers, n))
            timing["decode_pressed"].append(decode_step(rt, pressed, n))
            timing["ttft2_unpressed"].append(turn_two(b.engine, rt, layers, n))
            timing["ttft2_pressed"].append(turn_two(b.engine, rt, pressed, n))
        best = {k: round(min(v), 4) for k, v in timing.items()}
        row = {
            "visual_tokens": n_vis,
            "context_tokens": n,
            "kept_tokens": kept,
            "kv_bytes_bf16": bf16,
            "kv_bytes_pressed_bf16": nbytes(pressed) // 2,
            "kv_bytes_int8": int8,
            "kv_bytes_int4": int4,
            "kv_bytes_int4_pressed": int4_pressed,
            "pressed_vs_unpressed": round(nbytes(pressed) / nbytes(layers), 4),
            "int8_vs_bf16": round(int8 / bf16, 4),
            "int4_vs_bf16": round(int4 / bf16, 4),
            "int4_pressed_vs_bf16": round(int4_pressed / bf16, 4),
            "press_s": round(min(press_s), 4),
            **{f"{k}_s": v for k, v in best.items()},
            "decode_speedup": round(best["decode_unpressed"] / best["decode_pressed"], 2),
            "ttft2_speedup": round(best["ttft2_unpressed"] / best["ttft2_pressed"], 2),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
        del layers, pressed, bf
    result = {
        "meta": {
            "model": "tiny qwen2_vl bench (random weights; 12 layers, 16/4 heads of 64, fp32)",
            "press": {"press": press.press, "keep": press.keep, "window": press.window},
            "int4": {"group_size": 64, "residual": 32},
            "text_tokens": TEXT,
            "question_tokens": QUESTION,
            "threads": a.threads,
            "rounds": rounds,
            "timing": "best of interleaved rounds, every shape warmed; synthetic KV values",
            "cpu": platform.processor() or platform.machine(),
            "load_average_after": [round(x, 1) for x in os.getloadavg()],
            "torch": torch.__version__,
        },
        "rows": rows,
    }
    a.out.mkdir(parents=True, exist_ok=True)
    stem = f"kv{'_quick' if a.quick else ''}_cpu"
    write_results(a.out / f"{stem}.json", result)
    plot(rows, a.out / f"{stem}.png", press)
    print(f"-> {a.out / stem}.json / .png")


def plot(rows: list[dict], path: Path, press: KVConfig) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r["visual_tokens"] for r in rows]
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    ax[0].plot(x, [r["decode_unpressed_s"] * 1e3 for r in rows], "o-", label="unpressed")
    ax[0].plot(
        x, [r["decode_pressed_s"] * 1e3 for r in rows], "o-", label=f"{press.press} {press.keep}"
    )
    ax[0].set(title="decode step (ms)", xlabel="visual tokens", xscale="log")
    ax[1].plot(x, [r["ttft2_unpressed_s"] * 1e3 for r in rows], "o-", label="unpressed")
    ax[1].plot(x, [r["ttft2_pressed_s"] * 1e3 for r in rows], "o-", label="pressed")
    ax[1].set(title="turn-2 TTFT, 24 tokens (ms)", xlabel="visual tokens", xscale="log")
    for key, label in (
        ("pressed_vs_unpressed", f"pressed {press.keep}"),
        ("int8_vs_bf16", "int8"),
        ("int4_vs_bf16", "int4 g64"),
        ("int4_pressed_vs_bf16", "int4 + press"),
    ):
        ax[2].plot(x, [r[key] for r in rows], "o-", label=label)
    ax[2].set(title="KV bytes / bf16 KV", xlabel="visual tokens", xscale="log", ylim=(0, 0.6))
    for a_ in ax:
        a_.legend(fontsize=8)
    fig.suptitle("KV press and int4 KV, CPU, 1 thread (tiny bench Qwen2-VL, random weights)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


if __name__ == "__main__":
    main()
