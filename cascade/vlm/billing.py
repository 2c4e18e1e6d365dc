"""The one place a VLM call's `Bill` is computed, from what the call counted and the family's
shapes.

Every path of the runtime (generate, FastV, batches, session turns, the openai backend) counts its
tokens and times and calls `vlm_bill`; `baseline` prices the full-resolution baseline for
`compose_answer`. FLOPs come from `cascade.cost` with the family's shapes, so the vision tower,
the LLM prefill and the decode are billed apart, and a KV-cache hit is billed for what it computed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..bill import Bill, CacheOutcome
from ..cost import decode_flops, fastv_context, fastv_prefill_flops, prefill_flops
from .decode import Generated
from .families import Family, ImageCost, ImageLimits
from .press import KVConfig
from .reduction import ReductionConfig
from .result import geometric_confidence

__all__ = ["vlm_bill", "baseline"]


def vlm_bill(
    family: Family,
    model: str,
    *,
    costs: list[ImageCost],
    visual_tokens: int,
    prompt_tokens: int,
    generated: Generated | Sequence[Generated],
    cache: CacheOutcome,
    reduction: ReductionConfig,
    t0: float,
    vision_s: float,
    prefill_s: float,
    cached_tokens: int = 0,
    encoded: list[ImageCost] | tuple | None = None,
    fastv_layer: int | None = None,
    tower: list[ImageCost] | tuple | None = None,
    images_cached: int = 0,
    kv_bytes: tuple[int, int] = (0, 0),
    kv: KVConfig | None = None,
) -> Bill:
    """The bill of one request.

    costs: what each of its images costs the model (`Family.image_cost`), unreduced; encoded: the
    images this call ran through the tower (default: all of `costs`; none on a cache hit or a later
    session turn); images_cached: images whose tower output the encoder cache served; visual_tokens:
    visual tokens the LLM attended to (FastV: after its layer);
    prompt_tokens: text tokens of the prompt; cached_tokens: prompt tokens (visual and text) reused
    from a KV cache rather than prefilled; fastv_layer: FastV's K when it pruned; tower: what the
    tower costs on each image under a reduction before the tower (`tower`: only the kept patches
    are encoded), None when it encodes every patch. generated: the completion, or a request's n
    completions (one prefill, n decodes: their tokens and decode FLOPs add up; the finish reason
    and confidence are the first's). kv_bytes: (the KV decoded against, the same unpressed) in
    bytes; kv: the model's KV settings (its press). Vision FLOPs are billed on `tower` when given
    (and `encoded` defaults to it); visual tokens before reduction stay those of `costs`."""
    llm = family.shapes.llm
    unreduced = sum(c.tokens for c in costs)
    full = unreduced + prompt_tokens  # the prompt's length before any visual token is dropped
    n = visual_tokens + prompt_tokens
    if fastv_layer is None:
        prefill, context = prefill_flops(llm, n), float(n)
    else:
        prefill = fastv_prefill_flops(llm, full, n, fastv_layer)
        context = fastv_context(llm, full, n, fastv_layer)
    computed = (
        prefill if not cached_tokens else prefill_flops(llm, n - cached_tokens, past=cached_tokens)
    )
    towered = list(costs if tower is None else tower)
    encoded = list(towered if encoded is None else encoded)
    vision = family.vision_flops(towered)
    gens = [generated] if isinstance(generated, Generated) else list(generated)
    first, tokens = gens[0], sum(len(g.tokens) for g in gens)
    t_first = min(g.t_first for g in gens)
    t_end = max(g.t_end or time.perf_counter() for g in gens)
    steps = max(len(g.tokens) for g in gens) - 1
    return Bill(
        model=model,
        visual_tokens=visual_tokens,
        unreduced_visual_tokens=unreduced,
        prompt_tokens=prompt_tokens,
        cached_tokens=cached_tokens,
        generated_tokens=tokens,
        finish_reason=first.finish,
        vision_flops=vision,
        prefill_flops=prefill,
        decode_flops=sum(decode_flops(llm, context, len(g.tokens)) for g in gens),
        computed_vision_flops=family.vision_flops(encoded) if encoded else 0.0,
        computed_prefill_flops=computed,
        unreduced_prefill_flops=prefill_flops(llm, full),
        ttft_s=t_first - t0,
        vision_s=vision_s,
        prefill_s=prefill_s,
        total_s=t_end - t0,
        tpot_s=(t_end - t_first) / steps if steps > 0 else None,
        cache=cache,
        images_encoded=len(encoded),
        images_cached=images_cached,
        reduction=reduction.method,
        keep_ratio=reduction.keep_ratio,
        confidence=geometric_confidence(first.logprobs),
        kv_bytes=kv_bytes[0],
        kv_bytes_unpressed=kv_bytes[1],
        kv_press="none" if kv is None or kv.is_identity else kv.press,
        kv_keep=1.0 if kv is None or kv.is_identity else kv.keep,
    )


def baseline(
    family: Family, sizes: list[tuple[int, int]], prompt_tokens: int
) -> tuple[int, float, float]:
    """(visual tokens, tower FLOPs, prefill FLOPs) of sending images of these (width, height)
    whole at full resolution to the family's model, with `prompt_tokens` of text."""
    full = family.with_limits(ImageLimits(resolution="full"))
    costs = [full.image_cost(w, h) for w, h in sizes]
    tokens = sum(c.tokens for c in costs)
    return tokens, full.vision_flops(costs), prefill_flops(full.shapes.llm, tokens + prompt_tokens)
