"""Token generation: one loop for one completion, a request's n completions and a batch.

`Decoder.run` takes the last prefill's hidden states [B, n, D], the KV cache and one `Sequence`
per row, and repeats: LM head on the last position of the live rows -> log-softmax of the raw
logits (the log-probabilities reported, whatever the sampling settings) -> `logits.choose` (each
row's own processors and generator) -> each row's `Sequence.accept` (its stop conditions, its
streaming) -> feed the chosen tokens back, one step for the whole batch. A row stops on its own
(end-of-turn or stop token, a stop string, its max_tokens); the loop ends when every row has
(finished rows keep feeding their last token, and what follows is discarded).

`sequences(sampling, ...)` makes a request's `n` sequences (completion i seeded with seed + i;
each with its own grammar matcher when the settings ask for a response format,
`cascade.vlm.structured`);
`share_prefix` turns one prefilled prompt into n rows (the prefix KV repeated along the batch),
so n completions cost one tower run and one prefill.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from ..decoding import GREEDY, SamplingParams
from .logits import choose
from .sequence import Constraint, Generated, OnToken, Sequence, TokenEvent, TokenTexts
from .structured import Grammars

__all__ = [
    "SamplingParams",
    "GREEDY",
    "TokenEvent",
    "Generated",
    "Decoder",
    "OnToken",
    "Sequence",
    "share_prefix",
]

Step = Callable[[torch.Tensor, torch.Tensor, Any, "torch.Tensor | None"], torch.Tensor]


def share_prefix(hidden: torch.Tensor, cache: Any, n: int) -> torch.Tensor:
    """One prefilled prompt (hidden [1, L, D], its KV in `cache`) as n rows: the KV is repeated
    along the batch (DynamicCache appends with torch.cat, so each row then grows its own)."""
    if n > 1:
        cache.batch_repeat_interleave(n)
    return hidden.expand(n, *hidden.shape[1:])


class Decoder:
    """Generates from a loaded family's LM head and decoder (`FamilyRuntime`); stateless between
    calls (all per-completion state is in the `Sequence`s)."""

    def __init__(self, runtime: Any, eos_ids: frozenset[int], vocab_size: int | None = None):
        """vocab_size: the width of the LM head's logits (default: the tokenizer's length)."""
        self.runtime, self.eos_ids = runtime, eos_ids
        self.texts = TokenTexts(runtime.tokenizer)
        self.grammars = Grammars(runtime.tokenizer, vocab_size or len(runtime.tokenizer), eos_ids)

    def sequences(
        self,
        sampling: SamplingParams,
        max_new_tokens: int,
        on_token: OnToken | None = None,
        *,
        request: int = 0,
        constraint: Callable[[], Constraint | None] | None = None,
    ) -> list[Sequence]:
        """The `sampling.n` completions of one request, each with its own settings copy, seed
        (seed + i) and constraint state (its response format's grammar matcher, unless
        `constraint` makes another)."""
        fmt = sampling.response_format
        if constraint is None and fmt is not None:
            self.grammars.check(fmt)  # a schema that does not compile fails before any decode
            constraint = lambda: self.grammars.constraint(fmt)  # noqa: E731
        return [
            Sequence(
                sampling.for_completion(i),
                max_new_tokens,
                self.eos_ids,
                self.texts,
                device=self.runtime.device,
                on_token=on_token,
                request=request,
                choice=i,
                constraint=constraint() if constraint is not None else None,
            )
            for i in range(sampling.n)
        ]

    def pick(
        self,
        last: torch.Tensor,
        seqs: list[Sequence],
        on_error: Callable[[Sequence, Exception], object] | None = None,
    ) -> None:
        """One token for each of the B sequences from its last hidden state (`last` [B, D]): the
        LM head, the log-probabilities of the raw logits, each row's own choice (`logits.choose`)
        and its `Sequence.accept`. With `on_error`, an exception from one row's accept (its
        streaming callback refused the token: a cancelled request) is handed there and the other
        rows go on; without, it propagates."""
        logits = self.runtime.lm_head(last)
        logp = torch.log_softmax(logits.float(), -1)
        chosen = choose(logits, seqs)
        chosen_lp = logp.gather(-1, chosen[:, None])[:, 0].tolist()
        k = max(s.params.top_logprobs for s in seqs)
        top = logp.topk(k, -1) if k else None
        now = time.perf_counter()
        for i, (s, tok) in enumerate(zip(seqs, chosen.tolist(), strict=True)):
            alts = None
            if top is not None and s.params.top_logprobs:
                n = s.params.top_logprobs
                alts = tuple(
                    zip(top.indices[i, :n].tolist(), top.values[i, :n].tolist(), strict=True)
                )
            try:
                s.accept(tok, chosen_lp[i], alts, now)
            except Exception as e:
                if on_error is None:
                    raise
                on_error(s, e)

    def run(
        self,
        hidden: torch.Tensor,
        cache: Any,
        next_pos: list[int],
        seqs: list[Sequence],
        *,
        step: Step | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> list[Generated]:
        """Generate the B sequences whose prompts are in `cache` and whose last hidden states are
        `hidden` [B, n, D]. next_pos: each row's next text position. attention_mask [B, past]
        for a left-padded batch (None when nothing is padded). step(embeds, positions, cache, mask)
        runs one token per row through the decoder (default: the family's forward)."""
        fam = self.runtime
        B = hidden.shape[0]
        if len(seqs) != B or len(next_pos) != B:
            raise ValueError(f"{B} rows, {len(seqs)} sequences, {len(next_pos)} positions")
        step = step or (lambda e, p, c, m: fam.forward(e, p, c, attention_mask=m))
        pos = torch.tensor(next_pos, device=hidden.device)
        h = hidden
        with torch.inference_mode():
            while True:
                live = [b for b, s in enumerate(seqs) if not s.done]
                self.pick(
                    h[:, -1] if len(live) == B else h[torch.tensor(live, device=h.device), -1],
                    [seqs[b] for b in live],
                )
                if all(s.done for s in seqs):
                    break
                feed = torch.tensor([[s.generated.tokens[-1]] for s in seqs], device=hidden.device)
                if attention_mask is not None:
                    attention_mask = torch.cat(
                        [attention_mask, attention_mask.new_ones(B, 1)], dim=1
                    )
                positions = pos.view(1, B, 1).expand(fam.position_rows, B, 1)
                h = step(fam.embed(feed), positions, cache, attention_mask)
                pos = pos + 1
        return [s.generated for s in seqs]
