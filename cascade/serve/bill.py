"""An answer's bill as the server and the demo show it, and OpenAI `usage`, from `Answer.bill`.

Every number is a field of the typed `cascade.bill.Bill` the VLM call filled and `compose_answer`
completed with the full-resolution baseline; nothing here recomputes it. A tool answer (OCR read
the sign, the detector counted) spent no VLM tokens: its bill is zeros against the baseline, which
is the point.
"""

from __future__ import annotations

from typing import Any

from ..artifacts import Answer

__all__ = ["bill_of", "openai_usage", "cache_events"]


def bill_of(answer: Answer) -> dict[str, Any]:
    """Visual tokens, FLOPs (tower, prefill, decode) and time of this answer, each with its
    baseline when known."""
    b = answer.bill
    trace = answer.trace
    seconds = float(trace.seconds) if trace is not None else b.total_s
    base_visual = b.baseline_visual_tokens
    bill: dict[str, Any] = {
        "produced_by": answer.produced_by,
        "visual_tokens": b.visual_tokens,
        "baseline_visual_tokens": base_visual,
        "visual_tokens_saved": base_visual - b.visual_tokens if base_visual is not None else None,
        "text_tokens": b.prompt_tokens,
        "completion_tokens": b.generated_tokens,
        "vision_flops": b.vision_flops,
        "prefill_flops": b.prefill_flops,
        "decode_flops": b.decode_flops,
        "baseline_vision_flops": b.baseline_vision_flops,
        "baseline_prefill_flops": b.baseline_prefill_flops,
        "seconds": seconds,
        "vlm_seconds": b.ttft_s,
        "kv_cache": b.cache if answer.produced_by == "vlm" else "off",
        "images_encoded": b.images_encoded,
        "images_cached": b.images_cached,
        "kv_bytes": b.kv_bytes,
        "kv_bytes_unpressed": b.kv_bytes_unpressed,
    }
    if b.visual_token_savings is not None:
        bill["visual_token_savings"] = b.visual_token_savings
    if b.baseline_prefill_flops:
        bill["prefill_savings"] = b.prefill_savings
        # Time to first token scales with tower + prefill FLOPs for a fixed model: an estimate,
        # labelled as such.
        spent, savings = b.vision_flops + b.prefill_flops, b.ttft_savings
        if spent > 0 and b.ttft_s > 0 and savings is not None:
            bill["baseline_seconds_estimate"] = seconds - b.ttft_s + b.ttft_s * savings
    return bill


def openai_usage(answer: Answer) -> dict[str, Any]:
    """OpenAI `usage`: prompt = visual + text tokens the VLM prefilled (cached ones counted in
    `prompt_tokens_details.cached_tokens`); 0 for a tool answer."""
    b = answer.bill
    return {
        "prompt_tokens": b.input_tokens,
        "completion_tokens": b.generated_tokens,
        "total_tokens": b.input_tokens + b.generated_tokens,
        "prompt_tokens_details": {"cached_tokens": b.cached_tokens},
    }


def cache_events(answer: Answer) -> dict[str, tuple[int, int]]:
    """{cache name: (hits, lookups)} of one run: stage caches (`<x>_cache_hits` next to `<x>_images`
    computed) from the trace counters, and the VLM's KV prefix cache from the bill."""
    out: dict[str, tuple[int, int]] = {}
    trace = answer.trace
    if trace is not None:
        counters = trace.counters
        for key, hits in counters.items():
            if key.endswith("_cache_hits") and key != "kv_cache_hits":  # KV: from the bill below
                name = key[: -len("_cache_hits")]
                computed = counters.get(f"{name}_images", 0)
                if hits + computed:
                    out[name] = (int(hits), int(hits + computed))
    if answer.produced_by == "vlm" and answer.bill.cache != "off":
        out["kv_prefix"] = (int(answer.bill.cache != "miss"), 1)
    return out
