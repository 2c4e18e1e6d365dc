"""KV drift: what each press x keep ratio and each KV dtype changes in the model's output.

For every setting, against the same model with its KV untouched, over a fixed prompt set:
- max |delta logit| of the first generated token (over the vocabulary, the max over prompts, and
  the mean of each prompt's max),
- top-1 agreement: the share of prompts whose first token is the same,
- greedy agreement: the share of prompts whose whole greedy answer (N tokens) is the same,
- the KV kept (tokens after the press / before).

Two models:
1. `tiny_vlm`: the tiny random-weight Qwen2-VL ("test" size), through the real runtime: each
   prompt is two real photos + a question, the press runs inside the prefix engine, int8/int4 are
   the KV prefix cache's storage (the numbers are taken on the cache hit, so the KV really went
   through quantization). Random weights: the logits are nearly flat and carry no knowledge, so
   agreement here shows the mechanics are exact where they should be (keep 1.0, and where a press
   keeps what matters) and how far arithmetic perturbations travel through this architecture; it
   cannot show whether a press keeps what an answer needs.
2. `text_lm`: a byte-level Qwen2 decoder trained here on stdlib docstrings
   (benchmarks/kv_textlm.py; its held-out bits per byte are recorded): its attention and
   logits are learned, so agreement there says something about what the press dropped. Each
   prompt: 96 held-out bytes of context (the first 16 play the system prompt, kept by the
   visual-only presses, the rest the pressed span), then a 16-byte probe fed after the press, then
   16 greedy bytes (all within the 128 bytes the model was trained on). Two prompt kinds: "next"
   (the probe is the text that follows: mostly local, the context matters little) and "copy" (the
   probe repeats context bytes 40..56, so continuing it right means reading bytes 56..72 back
   from the KV, which a press may have dropped). For both, the share of greedy bytes equal to the
   true text is reported with and without the press. Same `press_block` and
   window-query capture as the VLM runtime.

    python benchmarks/kv_drift.py --quick     # ~6 + 12 prompts
    python benchmarks/kv_drift.py             # 12 + 32 prompts
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from cascade.artifacts import Image  # noqa: E402
from cascade.eval.photos import photo  # noqa: E402
from cascade.kernels.kv_int4 import dequantize_kv_int4, quantize_kv_int4  # noqa: E402
from cascade.kernels.kv_quant import dequantize_kv, quantize_kv  # noqa: E402
from cascade.provenance import write_results  # noqa: E402
from cascade.vlm import VLM, build_tiny_vlm  # noqa: E402
from cascade.vlm.kv_cache import cache_layers, new_dynamic_cache, set_cache_layers  # noqa: E402
from cascade.vlm.press import KVConfig, press_block, press_method  # noqa: E402
from cascade.vlm.press.queries import window_queries  # noqa: E402

PRESSES = ("snapkv", "snapkv_visual", "random", "recency")
KEEPS = (0.5, 0.2, 0.1)
PHOTOS = ("astronaut", "coffee", "chelsea", "bus", "rocket", "camera")
QUESTIONS = ("What is in the picture?", "Describe the colors.", "How many people are there?")


def _textlm():
    spec = importlib.util.spec_from_file_location("kv_textlm", HERE / "kv_textlm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def settings() -> list[tuple[str, dict]]:
    out = [("keep 1.0 (" + p + ")", {"press": p, "keep": 1.0}) for p in ("snapkv",)]
    out += [(f"{p} {k}", {"press": p, "keep": k}) for p in PRESSES for k in KEEPS]
    out += [
        ("int8", {"dtype": "int8"}),
        ("int4 g8 r0", {"dtype": "int4", "group_size": 8, "residual": 0}),
        ("int4 g16 r32", {"dtype": "int4", "group_size": 16, "residual": 32}),
        (
            "int4 g16 r0 + snapkv_visual 0.2",
            {
                "dtype": "int4",
                "group_size": 16,
                "residual": 0,
                "press": "snapkv_visual",
                "keep": 0.2,
            },
        ),
    ]
    return out


def compare(
    base: list[tuple[torch.Tensor, list[int]]], run: list[tuple[torch.Tensor, list[int]]]
) -> dict:
    deltas = [
        float((a[0].float() - b[0].float()).abs().max()) for a, b in zip(base, run, strict=True)
    ]
    top1 = [int(a[0].argmax()) == int(b[0].argmax()) for a, b in zip(base, run, strict=True)]
    greedy = [a[1] == b[1] for a, b in zip(base, run, strict=True)]
    return {
        "max_abs_dlogit": round(max(deltas), 5),
        "mean_max_abs_dlogit": round(sum(deltas) / len(deltas), 5),
        "top1_agreement": round(sum(top1) / len(top1), 3),
        "greedy_agreement": round(sum(greedy) / len(greedy), 3),
    }


# -- the tiny VLM, through the runtime ----------------------------------------------------------
def vlm_prompts(n: int) -> list[tuple[list[Image], str]]:
    imgs = [Image(photo(p), source=p) for p in PHOTOS]
    out = []
    for i in range(n):
        # distinct (pair, question) prompts: the second round pairs each photo with another one
        pair = [imgs[i % len(imgs)], imgs[(i + 1 + i // len(imgs)) % len(imgs)]]
        out.append((pair, QUESTIONS[i % len(QUESTIONS)]))
    return out


def vlm_run(path: Path, kv: dict | None, prompts, new_tokens: int):
    kv = kv or {}
    quantized = kv.get("dtype", "auto") != "auto"
    vlm = VLM.load(
        str(path),
        device="cpu",
        encoder_cache_bytes=0,
        kv_cache_bytes=(256 << 20) if quantized else 0,
        kv=kv,
    )
    b = vlm.backend
    red = b.check_reduction(None)
    out, kept = [], []
    for images, q in prompts:
        prefix_text, suffix_text = b.layout.first_turn(len(images), None, q)
        if quantized:
            b.engine.state(images, prefix_text, red)  # stores the blocks quantized
        state, status, _, _ = b.engine.state(images, prefix_text, red)
        assert status in ("hit", "off"), status
        cache = b.engine.cache_of(state)
        hidden = b.engine.prefill(cache, state.next_pos, b.layout.tokenize(suffix_text))
        with torch.inference_mode():
            logits = b.runtime.lm_head(hidden[:, -1])[0]
        r = vlm.generate(images, q, max_new_tokens=new_tokens)
        out.append((logits.detach(), list(r.token_ids)))
        kept.append((state.kv_tokens, state.length))
    return out, sum(k for k, _ in kept) / sum(n for _, n in kept)


# -- the text LM --------------------------------------------------------------------------------
class TextRuntime:
    """What `window_queries` needs of a model: its decoder layers and their query projection."""

    def __init__(self, model):
        self.text_model = model.model

    def query_states(self, layer, normed):
        attn = layer.self_attn
        q = attn.q_proj(normed)
        return q.view(*q.shape[:-1], -1, attn.head_dim).transpose(1, 2)


def text_prompts(
    held: bytes, n: int, kind: str, ctx: int = 96, probe: int = 16, answer: int = 16
) -> list[tuple[list[int], list[int], list[int]]]:
    """(context, probe, the true continuation) per prompt. kind "next": the probe is the text
    that follows the context; "copy": the probe repeats context bytes 40..56, so the true
    continuation is context bytes 56..72 and answering needs what the press may have dropped."""
    step = (len(held) - ctx - probe - answer) // n
    out = []
    for i in range(n):
        c = list(held[i * step : i * step + ctx])
        if kind == "copy":
            out.append((c, c[40:56], c[56 : 56 + answer]))
        else:
            rest = list(held[i * step + ctx : i * step + ctx + probe + answer])
            out.append((c, rest[:probe], rest[probe:]))
    return out


def accuracy(run: list[tuple[torch.Tensor, list[int]]], prompts) -> float:
    """Share of greedy bytes equal to the true continuation, over all prompts."""
    hits = sum(
        sum(a == b for a, b in zip(r[1], p[2], strict=True))
        for r, p in zip(run, prompts, strict=True)
    )
    return round(hits / sum(len(p[2]) for p in prompts), 3)


def text_run(model, kv: dict | None, prompts, new_tokens: int, system: int = 16):
    cfg = KVConfig.model_validate(kv or {})
    rt = TextRuntime(model)
    out, kept = [], []
    with torch.inference_mode():
        for ctx, probe, _ in prompts:
            cache = new_dynamic_cache(model.config)
            ids = torch.tensor([ctx])
            queries = None
            if not cfg.is_identity and press_method(cfg.press).needs_queries:
                with window_queries(rt, cfg.window) as queries:
                    model(input_ids=ids, past_key_values=cache, use_cache=True)
            else:
                model(input_ids=ids, past_key_values=cache, use_cache=True)
            layers = cache_layers(cache)
            visual = torch.ones(len(ctx), dtype=torch.bool)
            visual[:system] = False
            layers = press_block(cfg, layers, visual, queries)
            if cfg.dtype == "int8":
                q = quantize_kv([k for k, _ in layers], [v for _, v in layers], impl="torch")
                k, v = dequantize_kv(q, impl="torch")
                layers = list(zip(k.unbind(0), v.unbind(0), strict=True))
            elif cfg.dtype == "int4":
                layers = [
                    dequantize_kv_int4(quantize_kv_int4(k, v, cfg.group_size, cfg.residual))
                    for k, v in layers
                ]
            set_cache_layers(cache, layers)
            kept.append((layers[0][0].shape[2], len(ctx)))
            pos = len(ctx)
            feed = torch.tensor([probe])
            tokens, first = [], None
            for _ in range(new_tokens):
                positions = torch.arange(pos, pos + feed.shape[1])[None]
                logits = model(
                    input_ids=feed, past_key_values=cache, position_ids=positions, use_cache=True
                ).logits[0, -1]
                first = logits if first is None else first
                pos += feed.shape[1]
                tokens.append(int(logits.argmax()))
                feed = torch.tensor([[tokens[-1]]])
            out.append((first, tokens))
    return out, sum(k for k, _ in kept) / sum(n for _, n in kept)


def text_settings() -> list[tuple[str, dict]]:
    out = [(n, kv) for n, kv in settings() if not kv.get("dtype")]
    out += [
        ("int8", {"dtype": "int8"}),
        ("int4 g32 r0", {"dtype": "int4", "group_size": 32, "residual": 0}),
        ("int4 g32 r32", {"dtype": "int4", "group_size": 32, "residual": 32}),
        ("int4 g16 r0", {"dtype": "int4", "group_size": 16, "residual": 0}),
        (
            "int4 g32 r0 + snapkv_visual 0.2",
            {
                "dtype": "int4",
                "group_size": 32,
                "residual": 0,
                "press": "snapkv_visual",
                "keep": 0.2,
            },
        ),
    ]
    return out


def table(rows: list[dict]) -> str:
    lines = [
        "| model | setting | KV kept | max abs dlogit (max / mean) | top-1 agree | greedy agree "
        "| greedy bytes right (untouched KV) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['setting']} | {r['kv_kept']:.2f} | {r['max_abs_dlogit']:.3g} / "
            f"{r['mean_max_abs_dlogit']:.3g} | {r['top1_agreement']:.2f} | "
            f"{r['greedy_agreement']:.2f} | "
            + (
                f"{r['byte_accuracy']:.2f} ({r['byte_accuracy_unpressed']:.2f}) |"
                if "byte_accuracy" in r
                else "- |"
            )
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", choices=("tiny_vlm", "text_lm"), default=None)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    n_vlm, n_text = (6, 12) if a.quick else (12, 32)
    rows: list[dict] = []
    meta: dict = {
        "threads": a.threads,
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    t0 = time.perf_counter()
    if a.only in (None, "tiny_vlm"):
        path = build_tiny_vlm(family="qwen2_vl", size="test")
        prompts = vlm_prompts(n_vlm)
        base, _ = vlm_run(path, None, prompts, 12)
        for name, kv in settings():
            run, kept = vlm_run(path, kv, prompts, 12)
            rows.append(
                {
                    "model": "tiny_vlm (random)",
                    "setting": name,
                    "kv_kept": round(kept, 3),
                    **compare(base, run),
                }
            )
            print(rows[-1], flush=True)
        meta["tiny_vlm"] = {"prompts": len(prompts), "greedy_tokens": 12, "images_per_prompt": 2}
    if a.only in (None, "text_lm"):
        lm = _textlm()
        model, info, held = lm.load()
        for kind in ("next", "copy"):
            prompts = text_prompts(held, n_text, kind)
            base, _ = text_run(model, None, prompts, 16)
            for name, kv in text_settings():
                run, kept = text_run(model, kv, prompts, 16)
                rows.append(
                    {
                        "model": f"text_lm (trained), {kind}",
                        "setting": name,
                        "kv_kept": round(kept, 3),
                        **compare(base, run),
                        "byte_accuracy": accuracy(run, prompts),
                        "byte_accuracy_unpressed": accuracy(base, prompts),
                    }
                )
                print(rows[-1], flush=True)
        meta["text_lm"] = {
            "prompts": len(prompts),
            "greedy_tokens": 16,
            "context_bytes": 96,
            "probe_bytes": 16,
            "training": info,
        }
    meta["seconds"] = round(time.perf_counter() - t0, 1)
    meta["load_average_after"] = [round(x, 1) for x in os.getloadavg()]
    a.out.mkdir(parents=True, exist_ok=True)
    name = f"kv_drift{'_quick' if a.quick else ''}_cpu.json"
    write_results(a.out / name, {"meta": meta, "rows": rows})
    print(table(rows))
    print(f"-> {a.out / name}")


if __name__ == "__main__":
    main()
