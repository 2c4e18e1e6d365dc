"""One completion being generated: everything that belongs to it and to nothing else.

A `Sequence` holds its `SamplingParams`, its own `torch.Generator` (seeded from the params' seed,
so the same seed draws the same tokens whatever else shares the forward), its token limit and stop
conditions (end-of-turn ids, stop_token_ids, stop strings), its constraint (a response format's
grammar state), its streaming callback, its text so far and what it has streamed. The decoder's
batched step only stacks the rows' logits; the logits processors read each row's settings from
its sequence (`cascade.vlm.logits`), and `accept` applies that row's token to that row's state.

That is the seam continuous batching plugs into: a scheduler keeps a list of live `Sequence`s
from many requests, runs one forward over them, calls `choose(logits, seqs)` and
`seq.accept(...)` per row, drops the finished ones and admits new ones between steps; no setting
of one request can reach another, because none is held anywhere but in its own sequence.

Stop strings: the text is checked after every token; the first stop string found ends the
completion there (finish_reason "stop", the string and what follows are not returned). While
streaming, text that could be the start of a stop string is held back until the next tokens
show it is not (and sent when the completion ends for another reason).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import torch

from ..decoding import SamplingParams, TokenLogprob

__all__ = ["Sequence", "Constraint", "TokenTexts", "TokenEvent", "Generated", "OnToken"]


class Constraint(Protocol):
    """A per-sequence restriction of the next token (a grammar's matcher)."""

    def mask(self, logits: torch.Tensor) -> torch.Tensor:
        """logits [V] with the tokens not allowed next set to -inf."""

    def advance(self, token: int) -> None:
        """Record the chosen token."""


class TokenTexts:
    """Token ids as text for the logprobs output: each token's own text and its bytes (a
    byte-level BPE token may be part of a UTF-8 character: its bytes say which)."""

    def __init__(self, tokenizer: Any):
        from transformers.convert_slow_tokenizer import bytes_to_unicode

        self.tokenizer = tokenizer
        # byte-level BPE spells each byte as one printable character; this map reads it back
        self._bytes_of = {c: b for b, c in bytes_to_unicode().items()}

    def entry(
        self, token: int, logprob: float, top: tuple[tuple[int, float], ...] = ()
    ) -> TokenLogprob:
        text, raw = self._text(token)
        return TokenLogprob(text, logprob, raw, tuple(self.entry(t, lp) for t, lp in top))

    def _text(self, token: int) -> tuple[str, tuple[int, ...]]:
        piece = self.tokenizer.convert_ids_to_tokens(int(token))
        if isinstance(piece, str) and piece and all(c in self._bytes_of for c in piece):
            raw = bytes(self._bytes_of[c] for c in piece)
            return raw.decode("utf-8", errors="replace"), tuple(raw)
        text = self.tokenizer.decode([int(token)])
        return text, tuple(text.encode("utf-8"))


@dataclass(frozen=True)
class TokenEvent:
    """One generated token, as soon as it is chosen: which request of the call (0 for a single
    one) and which of its completions (`choice`, 0 unless n > 1), its index among that
    completion's tokens, the id, the text it adds to the answer ("" while a multi-byte character
    is incomplete, for an end-of-turn token, or while the text may be the start of a stop string;
    held-back text comes with a later token), log p, and its OpenAI logprobs entry when asked."""

    request: int
    index: int
    token_id: int
    text: str
    logprob: float
    choice: int = 0
    entry: TokenLogprob | None = None


OnToken = Callable[[TokenEvent], Any]


@dataclass
class Generated:
    """One completion's generation: tokens, their log-probabilities (top alternatives and OpenAI
    entries when asked), its text (a stop string cut off), why it stopped, and when its first and
    last tokens were chosen (perf_counter seconds)."""

    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[tuple[tuple[int, float], ...]] = field(default_factory=list)
    entries: list[TokenLogprob] = field(default_factory=list)
    text: str = ""
    finish: Literal["stop", "length"] = "length"
    t_first: float = 0.0
    t_end: float | None = None

    @property
    def done(self) -> bool:
        return self.t_end is not None


def _generator(params: SamplingParams, device: torch.device) -> torch.Generator | None:
    if params.greedy:
        return None
    seed = params.seed if params.seed is not None else int.from_bytes(os.urandom(8), "little")
    return torch.Generator(device=device).manual_seed(seed % 2**64)


class Sequence:
    """A completion's own state (module docstring). max_tokens: the caller's limit, unless the
    params set their own; end_ids: the model's end-of-turn ids (stop_token_ids are added)."""

    def __init__(
        self,
        params: SamplingParams,
        max_tokens: int,
        end_ids: frozenset[int],
        texts: TokenTexts,
        *,
        device: torch.device,
        on_token: OnToken | None = None,
        request: int = 0,
        choice: int = 0,
        constraint: Constraint | None = None,
    ):
        self.params, self.texts, self.on_token = params, texts, on_token
        self.request, self.choice, self.constraint = request, choice, constraint
        self.max_tokens = params.max_tokens or max_tokens
        self.end_ids = end_ids | frozenset(params.stop_token_ids)
        self.rng = _generator(params, device)
        self.generated = Generated()
        self._sent = 0  # characters of text streamed so far

    @property
    def done(self) -> bool:
        return self.generated.done

    def accept(
        self,
        token: int,
        logprob: float,
        top: tuple[tuple[int, float], ...] | None,
        now: float | None = None,
    ) -> None:
        """Record the chosen token, check the stop conditions, stream what is safe to show."""
        g, now = self.generated, now if now is not None else time.perf_counter()
        if not g.tokens:
            g.t_first = now
        g.tokens.append(token)
        g.logprobs.append(logprob)
        if top is not None:
            g.top_logprobs.append(top)
        entry = self.texts.entry(token, logprob, top or ()) if self.params.logprobs else None
        if entry is not None:
            g.entries.append(entry)
        if self.constraint is not None:
            self.constraint.advance(token)
        ended = token in self.end_ids
        finish: Literal["stop", "length"] | None = (
            "stop" if ended else "length" if len(g.tokens) >= self.max_tokens else None
        )
        text = self.texts.tokenizer.decode(
            g.tokens[:-1] if ended else g.tokens, skip_special_tokens=True
        )
        cut = self._stop_at(text)
        if cut is not None:
            text, finish = text[:cut], "stop"
        g.text = text
        shown = len(text) if finish is not None else self._safe(text)
        delta, self._sent = text[self._sent : shown], max(self._sent, shown)
        if finish is not None:
            g.finish, g.t_end = finish, now
        if self.on_token is not None:
            self.on_token(
                TokenEvent(
                    self.request, len(g.tokens) - 1, token, delta, logprob, self.choice, entry
                )
            )

    def _stop_at(self, text: str) -> int | None:
        """Where the first stop string starts in `text` (None: none there). Only the part that
        could hold a new match is searched: what was streamed never contains a stop's start."""
        if not self.params.stop:
            return None
        start = self._sent
        found = [i for i in (text.find(s, start) for s in self.params.stop) if i >= 0]
        return min(found) if found else None

    def _safe(self, text: str) -> int:
        """How much of `text` may be streamed now: not an incomplete character at its end, not a
        tail that could be the start of a stop string."""
        end = len(text.rstrip("\ufffd"))
        hold = max(
            (
                k
                for stop in self.params.stop
                for k in range(1, min(len(stop) - 1, end) + 1)
                if text[end - k : end] == stop[:k]
            ),
            default=0,
        )
        return max(end - hold, self._sent)
