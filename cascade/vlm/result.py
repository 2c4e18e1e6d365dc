"""What one VLM call returns: the text, the tokens, and its bill (tokens, FLOPs, time, memory)."""
from __future__ import annotations

import math
import resource
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..cost import TokenBill

__all__ = ["VLMResult", "peak_memory", "geometric_confidence"]


@dataclass(frozen=True)
class VLMResult:
    """One answer with its accounting.

    visual_tokens: visual tokens the LLM attended to after reduction (for FastV: after layer K);
    visual_tokens_before: what the unreduced model would have used. prompt_tokens: text tokens of
    the prompt (template + system + question; Np of the cost model). prefill_flops: cost-model FLOPs
    of this call's prompt (`cascade.cost`), baseline_prefill_flops: the same prompt with every
    visual token; computed_prefill_flops: what was actually computed (a prefix-cache hit only
    prefills the question). cache: "hit"/"miss" for the KV prefix cache, "session" for a later
    turn of a session, "off" when not used. Times in seconds: ttft_s includes preprocessing, the
    vision tower and prefill; tpot_s is the mean time per output token after the first.
    peak_memory_bytes: torch.cuda.max_memory_allocated on GPU, the process' peak RSS on CPU
    (peak_memory_kind says which), None when unknown.
    confidence: the model's own confidence in its answer, the geometric-mean probability of the
    generated tokens, exp(mean log p(token)), from the logits greedy decoding picked them from
    (log-softmax in fp32); in (0, 1], None where the backend cannot tell (a server that returns no
    logprobs). Routers read it as "the thumbnail was enough" (`resolution_router`).
    """

    text: str
    token_ids: tuple[int, ...]
    finish_reason: Literal["stop", "length"]
    model: str
    backend: str
    visual_tokens: int
    visual_tokens_before: int
    prompt_tokens: int
    generated_tokens: int
    prefill_flops: float
    baseline_prefill_flops: float
    computed_prefill_flops: float
    decode_flops: float
    ttft_s: float
    tpot_s: float | None
    total_s: float
    vision_s: float
    prefill_s: float
    cache: Literal["hit", "miss", "session", "off"]
    reduction: dict[str, Any] = field(default_factory=dict)
    peak_memory_bytes: int | None = None
    peak_memory_kind: str | None = None
    confidence: float | None = None

    @property
    def bill(self) -> TokenBill:
        return TokenBill(self.visual_tokens, self.prompt_tokens, self.generated_tokens,
                         self.prefill_flops, self.decode_flops, self.visual_tokens_before,
                         self.baseline_prefill_flops)

    @property
    def usage(self) -> dict[str, Any]:
        """Flat, JSON-friendly accounting (OpenAI-style names plus ours)."""
        d = asdict(self)
        for k in ("text", "token_ids"):
            d.pop(k)
        d["input_tokens"] = self.visual_tokens + self.prompt_tokens
        d["completion_tokens"] = self.generated_tokens
        d["kv_cache_hit"] = self.cache in ("hit", "session")
        d["prefill_savings"] = self.bill.prefill_savings
        return d


def peak_memory(device: Any) -> tuple[int | None, str | None]:
    """Peak memory since the last reset: CUDA allocator peak on GPU, process peak RSS otherwise."""
    import torch

    if getattr(device, "type", str(device)) == "cuda" and torch.cuda.is_available():
        return int(torch.cuda.max_memory_allocated(device)), "cuda_max_allocated"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # ru_maxrss is KiB on Linux, bytes on macOS.
    return int(rss if sys.platform == "darwin" else rss * 1024), "process_peak_rss"


def geometric_confidence(logprobs: list[float]) -> float | None:
    """exp(mean log p) of the generated tokens; None when there are none."""
    return math.exp(math.fsum(logprobs) / len(logprobs)) if logprobs else None
