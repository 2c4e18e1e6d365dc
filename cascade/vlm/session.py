"""Multi-turn questions over fixed media, reusing the KV cache every turn.

Turn 1 takes the visual prefix from the KV prefix cache (or computes it once); every later turn
appends only its new tokens to the session's own KV cache: the previous answer's unfed last token,
the template's end-of-turn marker, and the new user turn. Previous questions and answers therefore
*are* in the context, exactly as the chat template would lay them out (the answers as the token ids
the model generated, never re-tokenized text), and turn 2 runs no vision tower and no prefix
prefill. FastV is refused: its pruning depends on the question, so it has no shared prefix.
"""
from __future__ import annotations

import time
from typing import Any

import torch

from ..errors import InputError
from .media import as_images
from .reduction import ReductionConfig
from .result import VLMResult, geometric_confidence

__all__ = ["Session"]


class Session:
    """Conversation state for one set of media on a `TransformersBackend`.

    vision_tower_calls: vision-tower runs this session caused (1 on a prefix-cache miss, else 0).
    turns: (question, result) pairs so far.
    """

    def __init__(self, backend: Any, images: Any, *, system_prompt: str | None = None,
                 reduction: ReductionConfig | None = None, max_new_tokens: int = 64):
        self.backend = backend
        self.images = as_images(images)
        if not self.images:
            raise InputError("a session needs at least one image")
        self.system_prompt = system_prompt
        self.reduction = backend.check_reduction(reduction)
        if self.reduction.question_dependent:
            raise InputError("fastv depends on each question, so a session cannot share its prefix; "
                             "use a pre-LLM method (pool, divprune, visionzip, dart) in sessions")
        self.max_new_tokens = max_new_tokens
        self.vision_tower_calls = 0
        self.turns: list[tuple[str, VLMResult]] = []
        self._cache: Any = None
        self._next_pos = 0
        self._length = 0
        self._pending: list[int] = []
        self._text_tokens = 0
        self._visual = self._visual_before = 0

    def ask(self, question: str, max_new_tokens: int | None = None) -> VLMResult:
        b = self.backend
        t0 = time.perf_counter()
        if b.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(b.device)
        question = b.check_question(question)
        max_new = max_new_tokens or self.max_new_tokens
        n_img = len(self.images)
        vision_s = prefix_s = 0.0
        if self._cache is None:
            prefix_text, suffix_text = b.first_turn_texts(n_img, self.system_prompt, question)
            calls = b.vision_tower_calls
            state, status, vision_s, prefix_s = b.prefix_state(self.images, prefix_text, self.reduction)
            self.vision_tower_calls += b.vision_tower_calls - calls
            self._cache = state.to_cache(b.family.text_config, impl=b.kernels)
            self._next_pos, self._length = state.next_pos, state.length
            self._text_tokens = state.text_tokens
            self._visual, self._visual_before = state.visual_tokens, state.visual_tokens_before
            new = b.tokenize(suffix_text)
            cached_text = state.text_tokens if status == "hit" else 0
        else:
            status = "session"
            text = b.later_turn_text(n_img, self.system_prompt, len(self.turns), question)
            new = self._pending + b.tokenize(text)
            cached_text = self._text_tokens
        b.check_context(self._length + len(new), max_new)
        t = time.perf_counter()
        hidden = b.prefill_suffix(self._cache, self._next_pos, new)
        self._next_pos += len(new)
        self._length += len(new)
        self._text_tokens += len(new)
        logprobs: list[float] = []
        tokens, finish, t_first = b.greedy(hidden, self._cache, self._next_pos, max_new,
                                           logprobs=logprobs)
        # Every generated token but the last was fed back; the last is fed with the next turn,
        # except an end-of-turn token, which the template's own end marker replaces.
        fed = len(tokens) - 1
        self._next_pos += fed
        self._length += fed
        self._text_tokens += fed
        self._pending = [] if tokens[-1] in b.eos_ids else tokens[-1:]
        n_prompt = self._text_tokens - fed
        computed = b.prefill_cost(self._visual, n_prompt) - (
            b.prefill_cost(self._visual, cached_text) if status != "off" and status != "miss" else 0.0)
        result = b.result(tokens, finish, self._visual, self._visual_before, n_prompt, computed,
                          vision_s, prefix_s + (t_first - t), t0, t_first, status, self.reduction,
                          confidence=geometric_confidence(logprobs))
        self.turns.append((question, result))
        return result
