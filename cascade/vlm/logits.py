"""Choosing the next token for a batch of sequences, each with its own settings.

`choose(logits, seqs)` runs a chain of small logits processors, then picks: the argmax for a
greedy sequence, a draw from its own `torch.Generator` for a sampled one. Every processor reads
its parameter per row (a [B, 1] tensor built from each sequence's `SamplingParams`), so one
forward over sequences with different settings applies each row's own: nothing is shared but the
logits tensor. A processor no row needs is skipped, which keeps the default greedy pick the plain
argmax of the raw logits, bit for bit.

The chain, in vLLM's order: a sequence's constraint (a response format's grammar: tokens it
forbids get -inf) -> repetition / presence / frequency penalties (over the tokens the sequence has
generated so far; the prompt is mostly image placeholders, so it is not counted) -> temperature
-> top-k -> top-p -> min-p. Log-probabilities reported to the caller are taken from the raw logits
before the chain (`cascade.vlm.decode`), as OpenAI and vLLM report them.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence as Seq
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .sequence import Sequence

__all__ = ["choose", "PROCESSORS"]

Processor = Callable[[torch.Tensor, Seq["Sequence"]], torch.Tensor]


def _column(
    seqs: Seq[Sequence],
    value: Callable[[Sequence], float],
    like: torch.Tensor,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    return torch.tensor([value(s) for s in seqs], dtype=dtype or like.dtype, device=like.device)[
        :, None
    ]


def constrain(x: torch.Tensor, seqs: Seq[Sequence]) -> torch.Tensor:
    """Tokens a sequence's constraint forbids (a response format's grammar) get -inf."""
    for b, s in enumerate(seqs):
        if s.constraint is not None:
            x[b] = s.constraint.mask(x[b])
    return x


def penalize(x: torch.Tensor, seqs: Seq[Sequence]) -> torch.Tensor:
    """Repetition (vLLM / CTRL: divide a seen token's positive logit by p, multiply a negative
    one), presence (minus once) and frequency (minus per occurrence) penalties."""
    if not any(s.params.penalized for s in seqs):
        return x
    counts = torch.zeros_like(x)
    for b, s in enumerate(seqs):
        if s.params.penalized and s.generated.tokens:
            ids = torch.tensor(s.generated.tokens, device=x.device)
            counts[b].index_add_(0, ids, torch.ones_like(ids, dtype=x.dtype))
    seen = counts > 0
    rep = _column(seqs, lambda s: s.params.repetition_penalty, x)
    x = torch.where(seen, torch.where(x > 0, x / rep, x * rep), x)
    pres = _column(seqs, lambda s: s.params.presence_penalty, x)
    freq = _column(seqs, lambda s: s.params.frequency_penalty, x)
    return x - pres * seen.to(x.dtype) - freq * counts


def temperature(x: torch.Tensor, seqs: Seq[Sequence]) -> torch.Tensor:
    # A greedy row's argmax is taken before this step; 1 keeps its row finite.
    return x / _column(seqs, lambda s: s.params.temperature or 1.0, x)


def top_k(x: torch.Tensor, seqs: Seq[Sequence]) -> torch.Tensor:
    if not any(s.params.top_k > 0 for s in seqs):
        return x
    vocab = x.shape[-1]
    k = _column(
        seqs, lambda s: min(s.params.top_k, vocab) if s.params.top_k > 0 else vocab, x, torch.long
    )
    kth = x.sort(-1, descending=True).values.gather(-1, k - 1)
    return x.masked_fill(x < kth, float("-inf"))


def top_p(x: torch.Tensor, seqs: Seq[Sequence]) -> torch.Tensor:
    if not any(s.params.top_p < 1 for s in seqs):
        return x
    p = _column(seqs, lambda s: s.params.top_p, x)
    active = p < 1
    srt, idx = x.sort(-1, descending=True)
    probs = srt.softmax(-1)
    # Drop a token once the more likely ones already reach top_p (the first always stays).
    drop = ((probs.cumsum(-1) - probs) >= p) & active
    return x.scatter(-1, idx, srt.masked_fill(drop, float("-inf")))


def min_p(x: torch.Tensor, seqs: Seq[Sequence]) -> torch.Tensor:
    if not any(s.params.min_p > 0 for s in seqs):
        return x
    probs = x.softmax(-1)
    floor = _column(seqs, lambda s: s.params.min_p, x) * probs.max(-1, keepdim=True).values
    return x.masked_fill(probs < floor, float("-inf"))


PROCESSORS: tuple[Processor, ...] = (temperature, top_k, top_p, min_p)


def choose(logits: torch.Tensor, seqs: Seq[Sequence]) -> torch.Tensor:
    """The next token of each row [B] (long)."""
    x = logits
    if any(s.constraint is not None for s in seqs):
        x = constrain(x.float().clone(), seqs)
    x = penalize(x, seqs)
    greedy = x.argmax(-1)
    sampled = [b for b, s in enumerate(seqs) if not s.params.greedy]
    if not sampled:
        return greedy
    rows = torch.tensor(sampled, device=x.device)
    hot, hot_seqs = x.index_select(0, rows).float(), [seqs[b] for b in sampled]
    for proc in PROCESSORS:
        hot = proc(hot, hot_seqs)
    probs = hot.softmax(-1)
    chosen = greedy.clone()
    for i, b in enumerate(sampled):
        chosen[b] = torch.multinomial(probs[i], 1, generator=seqs[b].rng)[0]
    return chosen
