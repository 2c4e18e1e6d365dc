"""Token generation: one loop for a single request and for a batch, greedy or sampled.

`Decoder.run` takes the last prefill's hidden states [B, n, D] and the KV cache, and repeats: LM
head on the last position -> pick a token per request (argmax, or `Sampling`: temperature, top-k,
top-p, optional seed) -> record it with its log-probability -> feed it back, one step for the whole
batch. A request stops at its own end-of-turn token or `max_new_tokens`; the batch stops when all
have (stopped requests keep feeding their last token, and what follows is discarded).

Every chosen token can be streamed: `on_token(TokenEvent)` is called as it is picked, with the text
it adds (incremental detokenization that holds back an incomplete UTF-8 character) and its
log-probability. Log-probabilities are always those of the model (fp32 log-softmax of the raw
logits), whatever the sampling settings, so a sampled answer still reports the model's confidence.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from ..errors import InputError

__all__ = ["Sampling", "TokenEvent", "Generated", "Decoder", "OnToken"]


@dataclass(frozen=True)
class Sampling:
    """How the next token is picked. temperature 0 is greedy (top_p/top_k/seed unused); else the
    logits are divided by temperature, cut to the top_k most likely (0: no cut) and to the
    smallest set whose probability reaches top_p, and a token is drawn; `seed` makes the draw
    reproducible (each request of a batch draws from its own generator seeded with it)."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None

    def __post_init__(self):
        if not (isinstance(self.temperature, (int, float)) and self.temperature >= 0):
            raise InputError(f"temperature must be a number >= 0, got {self.temperature!r}")
        if not (isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1):
            raise InputError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not (isinstance(self.top_k, int) and self.top_k >= 0):
            raise InputError(f"top_k must be an integer >= 0, got {self.top_k!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


GREEDY = Sampling()


@dataclass(frozen=True)
class TokenEvent:
    """One generated token, as soon as it is chosen: which request of the call (0 for a single
    one), its index among that request's tokens, the id, the text it adds to the answer (may be
    "" while a multi-byte character is incomplete, or for a special token) and log p."""

    request: int
    index: int
    token_id: int
    text: str
    logprob: float


OnToken = Callable[[TokenEvent], Any]


@dataclass
class Generated:
    """One request's generation: tokens, their log-probabilities (and top alternatives when asked),
    why it stopped, and when its first and last tokens were chosen (perf_counter seconds)."""

    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[tuple[tuple[int, float], ...]] = field(default_factory=list)
    finish: Literal["stop", "length"] = "length"
    t_first: float = 0.0
    t_end: float | None = None
    _text: str = ""

    @property
    def done(self) -> bool:
        return self.t_end is not None


Step = Callable[[torch.Tensor, torch.Tensor, Any, "torch.Tensor | None"], torch.Tensor]


class Decoder:
    """Generates from a loaded family's LM head and decoder (`FamilyRuntime`); stateless between
    calls."""

    def __init__(self, runtime: Any, eos_ids: frozenset[int]):
        self.runtime, self.eos_ids = runtime, eos_ids

    def run(self, hidden: torch.Tensor, cache: Any, next_pos: list[int], max_new_tokens: int,
            sampling: Sampling = GREEDY, *, step: Step | None = None,
            attention_mask: torch.Tensor | None = None, on_token: OnToken | None = None,
            top_logprobs: int = 0) -> list[Generated]:
        """Generate for B requests whose prompts are in `cache` and whose last hidden states are
        `hidden` [B, n, D]. next_pos: each request's next text position. attention_mask [B, past]
        for a left-padded batch (None when nothing is padded). step(embeds, positions, cache, mask)
        runs one token per request through the decoder (default: the family's forward)."""
        fam = self.runtime
        B = hidden.shape[0]
        step = step or (lambda e, p, c, m: fam.forward(e, p, c, attention_mask=m))
        gens = [Generated() for _ in range(B)]
        rngs = self._generators(sampling, B, hidden.device)
        pos = torch.tensor(next_pos, device=hidden.device)
        h = hidden
        with torch.inference_mode():
            while True:
                logits = fam.lm_head(h[:, -1])
                logp = torch.log_softmax(logits.float(), -1)
                chosen = logits.argmax(-1) if sampling.greedy else self._sample(logits, sampling, rngs)
                chosen_lp = logp.gather(-1, chosen[:, None])[:, 0].tolist()
                top = logp.topk(top_logprobs, -1) if top_logprobs else None
                now = time.perf_counter()
                for b, tok in enumerate(chosen.tolist()):
                    g = gens[b]
                    if g.done:  # a stopped request's later steps are not its tokens
                        continue
                    if not g.tokens:
                        g.t_first = now
                    g.tokens.append(tok)
                    g.logprobs.append(chosen_lp[b])
                    if top is not None:
                        g.top_logprobs.append(tuple(zip(top.indices[b].tolist(), top.values[b].tolist())))
                    if on_token is not None:
                        on_token(TokenEvent(b, len(g.tokens) - 1, tok, self._delta(g), chosen_lp[b]))
                    if tok in self.eos_ids or len(g.tokens) >= max_new_tokens:
                        g.finish = "stop" if tok in self.eos_ids else "length"
                        g.t_end = now
                if all(g.done for g in gens):
                    break
                feed = torch.tensor([[g.tokens[-1]] for g in gens], device=hidden.device)
                if attention_mask is not None:
                    attention_mask = torch.cat([attention_mask, attention_mask.new_ones(B, 1)], dim=1)
                positions = pos.view(1, B, 1).expand(fam.position_rows, B, 1)
                h = step(fam.embed(feed), positions, cache, attention_mask)
                pos = pos + 1
        return gens

    def _delta(self, g: Generated) -> str:
        """The text the newest token adds (held back while it ends in an incomplete character)."""
        text = self.runtime.tokenizer.decode(g.tokens, skip_special_tokens=True)
        if text.endswith("\ufffd"):
            return ""
        delta = text[len(g._text):] if text.startswith(g._text) else text
        g._text = text
        return delta

    @staticmethod
    def _generators(sampling: Sampling, n: int, device: torch.device) -> list[torch.Generator | None]:
        if sampling.greedy or sampling.seed is None:
            return [None] * n
        return [torch.Generator(device=device).manual_seed(sampling.seed) for _ in range(n)]

    @staticmethod
    def _sample(logits: torch.Tensor, s: Sampling, rngs: list[torch.Generator | None]) -> torch.Tensor:
        x = logits.float() / s.temperature
        if s.top_k:
            kth = x.topk(min(s.top_k, x.shape[-1]), -1).values[:, -1:]
            x = x.masked_fill(x < kth, float("-inf"))
        if s.top_p < 1.0:
            srt, idx = x.sort(-1, descending=True)
            probs = srt.softmax(-1)
            # Drop a token when the more likely ones already reach top_p (the first always stays).
            drop = (probs.cumsum(-1) - probs) >= s.top_p
            x = x.scatter(-1, idx, srt.masked_fill(drop, float("-inf")))
        probs = x.softmax(-1)
        return torch.cat([torch.multinomial(probs[b], 1, generator=rngs[b]) for b in range(len(rngs))])
