"""An answer's bill (what it cost next to the full-resolution baseline) and OpenAI `usage`.

The numbers come from `Answer.usage` (filled by the VLM stage and `compose_answer`) and the trace.
A tool answer (OCR read the sign, the detector counted) spent no VLM tokens: its bill is zeros
against the baseline, which is the point.
"""
from __future__ import annotations

from typing import Any

from ..artifacts import Answer

__all__ = ["bill_of", "openai_usage", "cache_events"]


def _num(d: dict[str, Any], *keys: str, default: float = 0) -> float:
    for k in keys:
        v = d.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return v
    return default


def bill_of(answer: Answer) -> dict[str, Any]:
    """Visual tokens, prefill FLOPs and time of this answer, each with its baseline when known."""
    u = answer.usage or {}
    visual = int(_num(u, "visual_tokens"))
    text = int(_num(u, "prompt_tokens"))
    base_visual = u.get("baseline_visual_tokens")
    flops = float(_num(u, "prefill_flops"))
    base_flops = u.get("baseline_prefill_flops")
    trace = answer.trace
    seconds = float(trace.seconds) if trace is not None else float(_num(u, "total_s"))
    vlm_seconds = float(_num(u, "ttft_s", "total_s"))
    bill: dict[str, Any] = {
        "produced_by": answer.produced_by,
        "visual_tokens": visual,
        "baseline_visual_tokens": int(base_visual) if base_visual is not None else None,
        "visual_tokens_saved": int(base_visual) - visual if base_visual is not None else None,
        "text_tokens": text,
        "completion_tokens": int(_num(u, "completion_tokens", "generated_tokens")),
        "prefill_flops": flops,
        "baseline_prefill_flops": float(base_flops) if base_flops is not None else None,
        "seconds": seconds,
        "vlm_seconds": vlm_seconds,
        "kv_cache": u.get("cache", "off" if answer.produced_by == "tool" else None),
    }
    if base_visual:
        bill["visual_token_savings"] = base_visual / max(visual, 1)
    if base_flops:
        bill["prefill_savings"] = base_flops / max(flops, 1.0)
        # Prefill time scales with FLOPs for a fixed model: an estimate, labelled as such.
        if flops > 0 and vlm_seconds > 0:
            bill["baseline_seconds_estimate"] = seconds - vlm_seconds + vlm_seconds * base_flops / flops
    return bill


def openai_usage(answer: Answer) -> dict[str, Any]:
    """OpenAI `usage`: prompt = visual + text tokens the VLM prefilled; 0 for a tool answer."""
    u = answer.usage or {}
    visual, text = int(_num(u, "visual_tokens")), int(_num(u, "prompt_tokens"))
    prompt = int(_num(u, "input_tokens", default=visual + text))
    completion = int(_num(u, "completion_tokens", "generated_tokens"))
    cached = visual if u.get("cache") in ("hit", "session") else 0
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


def cache_events(answer: Answer) -> dict[str, tuple[int, int]]:
    """{cache name: (hits, lookups)} of one run: stage caches (`<x>_cache_hits` next to `<x>_images`
    computed) from the trace counters, and the VLM's KV prefix cache from the usage."""
    out: dict[str, tuple[int, int]] = {}
    trace = answer.trace
    if trace is not None:
        counters = trace.counters
        for key, hits in counters.items():
            if key.endswith("_cache_hits") and key != "kv_cache_hits":  # KV: from the usage below
                name = key[: -len("_cache_hits")]
                computed = counters.get(f"{name}_images", 0)
                if hits + computed:
                    out[name] = (int(hits), int(hits + computed))
    kv = (answer.usage or {}).get("cache")
    if kv in ("hit", "session", "miss"):
        out["kv_prefix"] = (int(kv != "miss"), 1)
    return out
