"""Multi-turn questions over fixed media, reusing the KV cache every turn.

A session is a client of the prefix engine: turn 1 takes the visual prefix from the KV prefix
cache (or computes it once); every later turn appends only its new tokens to the session's own KV
cache: the previous answer's unfed last token, the template's end-of-turn marker, and the new user
turn. Previous questions and answers therefore *are* in the context, exactly as the chat template
would lay them out (the answers as the token ids the model generated, never re-tokenized text), and
turn 2 runs no vision tower and no prefix prefill. FastV is refused: its pruning depends on the
question, so it has no shared prefix.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import InputError
from .billing import vlm_bill
from .decode import GREEDY, OnToken, SamplingParams
from .media import as_images
from .prefix import sync
from .reduction import ReductionConfig
from .result import VLMResult

__all__ = ["Session"]


class Session:
    """Conversation state for one set of media on a `TransformersBackend`.

    vision_tower_calls: vision-tower runs this session caused (1 on a prefix-cache miss, else 0).
    turns: (question, result) pairs so far.
    """

    def __init__(
        self,
        backend: Any,
        images: Any,
        *,
        system_prompt: str | None = None,
        reduction: ReductionConfig | None = None,
        max_new_tokens: int = 64,
    ):
        self.backend = backend
        self.images = as_images(images)
        if not self.images:
            raise InputError("a session needs at least one image")
        self.system_prompt = system_prompt
        self.reduction = backend.check_reduction(reduction)
        if self.reduction.question_dependent:
            raise InputError(
                "fastv depends on each question, so a session cannot share its prefix; "
                "use a pre-LLM method (pool, divprune, visionzip, dart) in sessions"
            )
        self.max_new_tokens = max_new_tokens
        self.costs = [backend.family.image_cost(im.width, im.height) for im in self.images]
        self.vision_tower_calls = 0
        self.turns: list[tuple[str, VLMResult]] = []
        self._cache: Any = None
        self._tower: tuple | None = None  # what the tower encoded, for a `tower` reduction
        self._next_pos = 0
        self._length = 0  # tokens in the session's KV cache
        self._pending: list[int] = []  # the last answer's final token, fed with the next turn
        self._visual = 0

    @property
    def kv_bytes(self) -> int:
        """Bytes of the session's KV cache now (pressed, when the model has a press)."""
        return (
            0
            if self._cache is None
            else self.backend.kv_bytes([self._cache.get_seq_length()], [0])[0]
        )

    def ask(
        self,
        question: str,
        max_new_tokens: int | None = None,
        sampling: SamplingParams = GREEDY,
        on_token: OnToken | None = None,
    ) -> VLMResult:
        """The next turn. One completion per turn (the conversation keeps one answer): n > 1 is
        refused. A stop string ends the answer's text; the tokens generated up to it stay in the
        session's context. The turn holds the backend's lock: it decodes on its own KV cache,
        outside the model's continuous batch."""
        with self.backend.lock:
            return self._ask(question, max_new_tokens, sampling, on_token)

    def _ask(
        self,
        question: str,
        max_new_tokens: int | None,
        sampling: SamplingParams,
        on_token: OnToken | None,
    ) -> VLMResult:
        b, engine = self.backend, self.backend.engine
        t0 = b.begin_call()
        sampling = b.check_sampling(sampling, one="a session")
        question = b.layout.check_question(question)
        max_new = sampling.max_tokens or max_new_tokens or self.max_new_tokens
        n_img = len(self.images)
        vision_s = prefix_s = 0.0
        encoded, images_cached = (), 0  # a later turn runs no tower
        if self._cache is None:
            prefix_text, suffix_text = b.layout.first_turn(n_img, self.system_prompt, question)
            calls = engine.vision_tower_calls
            state, status, vision_s, prefix_s = engine.state(
                self.images, prefix_text, self.reduction
            )
            self.vision_tower_calls += engine.vision_tower_calls - calls
            self._cache = engine.cache_of(state)
            self._next_pos, self._length, self._visual = (
                state.next_pos,
                state.length,
                state.visual_tokens,
            )
            self._tower = state.tower_costs
            new = b.layout.tokenize(suffix_text)
            cached = state.cached_tokens
            encoded, images_cached = state.encoded, state.images_cached
        else:
            status = "session"
            text = b.layout.next_turn(n_img, self.system_prompt, len(self.turns), question)
            new = self._pending + b.layout.tokenize(text)
            cached = self._length
        engine.check_context(self._length + len(new), max_new)
        t = time.perf_counter()
        hidden = engine.prefill(self._cache, self._next_pos, new)
        self._next_pos += len(new)
        self._length += len(new)
        (gen,) = b.decoder.run(
            hidden, self._cache, [self._next_pos], b.decoder.sequences(sampling, max_new, on_token)
        )
        sync(b.device)
        prompt_tokens = self._length - self._visual
        # Every generated token but the last was fed back; the last is fed with the next turn,
        # except an end-of-turn token, which the template's own end marker replaces.
        fed = len(gen.tokens) - 1
        self._next_pos += fed
        self._length += fed
        self._pending = [] if gen.tokens[-1] in b.eos_ids else gen.tokens[-1:]
        bill = vlm_bill(
            b.family,
            b.model_id,
            costs=self.costs,
            visual_tokens=self._visual,
            prompt_tokens=prompt_tokens,
            generated=gen,
            cache=status,
            reduction=self.reduction,
            t0=t0,
            vision_s=vision_s,
            prefill_s=prefix_s + gen.t_first - t,
            cached_tokens=cached,
            encoded=encoded,
            images_cached=images_cached,
            tower=self._tower,
            kv_bytes=b.kv_bytes([self._cache.get_seq_length()], [self._length]),
            kv=b.kv,
        )
        result = b.result(gen, bill)
        self.turns.append((question, result))
        return result
