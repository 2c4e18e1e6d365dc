"""What one VLM call returns: the text, the tokens with their log-probabilities, and its `Bill`."""

from __future__ import annotations

import math
import resource
import sys
from dataclasses import dataclass
from typing import Any

from ..bill import Bill
from ..decoding import Completion

__all__ = ["VLMResult", "peak_memory", "geometric_confidence"]


@dataclass(frozen=True)
class VLMResult:
    """One answer with its accounting.

    token_ids: the generated tokens; logprobs: log p of each under the model (fp32 log-softmax of
    the raw logits, whatever the sampling settings; empty where the backend cannot tell);
    top_logprobs: per token, the `top_logprobs` most likely (token id, log p) when asked for.
    completions: the request's `n` completions (text, finish reason, tokens, OpenAI logprobs
    entries when asked); the first is this result's own text and tokens.
    bill: tokens, FLOPs (vision / prefill / decode), times, cache outcome, reduction and the
    confidence (exp of the mean logprob) of this call (`cascade.bill.Bill`).
    peak_memory_bytes: torch.cuda.max_memory_allocated on GPU, the process' peak RSS on CPU
    (peak_memory_kind says which), None when unknown.
    """

    text: str
    token_ids: tuple[int, ...]
    model: str
    backend: str
    bill: Bill
    logprobs: tuple[float, ...] = ()
    top_logprobs: tuple[tuple[tuple[int, float], ...], ...] = ()
    completions: tuple[Completion, ...] = ()
    peak_memory_bytes: int | None = None
    peak_memory_kind: str | None = None

    @property
    def finish_reason(self) -> str:
        return self.bill.finish_reason

    @property
    def confidence(self) -> float | None:
        """The model's confidence in its answer: the geometric-mean probability of its tokens."""
        return self.bill.confidence


def peak_memory(device: Any) -> tuple[int | None, str | None]:
    """Peak memory since the last reset: CUDA allocator peak on GPU, process peak RSS otherwise."""
    import torch

    if getattr(device, "type", str(device)) == "cuda" and torch.cuda.is_available():
        return int(torch.cuda.max_memory_allocated(device)), "cuda_max_allocated"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # ru_maxrss is KiB on Linux, bytes on macOS.
    return int(rss if sys.platform == "darwin" else rss * 1024), "process_peak_rss"


def geometric_confidence(logprobs: list[float] | tuple[float, ...]) -> float | None:
    """exp(mean log p) of the generated tokens; None when there are none."""
    return math.exp(math.fsum(logprobs) / len(logprobs)) if logprobs else None
