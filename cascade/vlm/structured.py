"""Structured output: a response format (`cascade.decoding.ResponseFormat`) as a per-sequence
grammar constraint, through xgrammar.

xgrammar (the default structured-output backend of vLLM and SGLang) compiles a JSON Schema, or
its built-in JSON grammar for `json_object`, against the model's own tokenizer
(`TokenizerInfo.from_huggingface`: byte-level BPE such as Qwen's and the tiny test checkpoint's
are handled by their byte mapping), and a `GrammarMatcher` per sequence says which tokens may
come next. `GrammarConstraint` is that matcher behind the decoder's `Constraint` protocol: the
first logits processor (`cascade.vlm.logits.constrain`) sets every token it forbids to -inf, and
`Sequence.accept` advances it. Once the JSON is complete only the model's end-of-turn tokens are
allowed, so a completion stops on its own; with `max_tokens` too small for the shape the answer is
cut (finish_reason "length") like any other. Compiled grammars are cached per schema.

Whitespace between JSON tokens is compact (`any_whitespace=False`): a model is not free to spend
its budget on indentation, and the output parses the same. xgrammar's string rule admits raw
control characters (below U+0020), which JSON forbids unescaped (`json.loads` refuses them), so
tokens holding one are masked too: compact JSON never needs one (a string can escape it).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

import torch

from ..decoding import ResponseFormat
from ..errors import InputError

__all__ = ["Grammars", "GrammarConstraint"]


class GrammarConstraint:
    """One sequence's matcher (the decoder's `Constraint`)."""

    def __init__(self, compiled: Any, stop_ids: list[int], vocab_size: int, control: torch.Tensor):
        import xgrammar as xgr

        self._xgr = xgr
        self.matcher = xgr.GrammarMatcher(compiled, override_stop_tokens=stop_ids)
        self.vocab_size, self.control = vocab_size, control
        self._mask = xgr.allocate_token_bitmask(1, vocab_size)

    def mask(self, logits: torch.Tensor) -> torch.Tensor:
        self.matcher.fill_next_token_bitmask(self._mask)
        row = logits[None, : self.vocab_size].float().contiguous()
        self._xgr.apply_token_bitmask_inplace(row, self._mask.to(row.device))
        out = logits.float().clone()
        out[: self.vocab_size] = row[0]
        out[self.vocab_size :] = float("-inf")  # the model's padded vocabulary: never a token
        return out.masked_fill_(self.control.to(out.device), float("-inf"))

    def advance(self, token: int) -> None:
        if not self.matcher.is_terminated():
            self.matcher.accept_token(int(token))


class Grammars:
    """Compiles response formats for one model's tokenizer (once each) and hands every sequence
    its own matcher."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: frozenset[int]):
        self.tokenizer, self.vocab_size = tokenizer, vocab_size
        self.stop_ids = sorted(stop_ids)
        self._compiler: Any = None
        self._control: torch.Tensor | None = None  # [V] tokens holding a raw control character
        self._compile = lru_cache(maxsize=64)(self._compile_uncached)

    def constraint(self, fmt: ResponseFormat) -> GrammarConstraint:
        compiled = self._compile(fmt.type, json.dumps(fmt.schema))
        assert self._control is not None  # the first compile set it
        return GrammarConstraint(compiled, self.stop_ids, self.vocab_size, self._control)

    def check(self, fmt: ResponseFormat) -> None:
        """Compile now: a schema xgrammar cannot compile is an InputError naming it."""
        self._compile(fmt.type, json.dumps(fmt.schema))

    def _compile_uncached(self, kind: str, schema: str) -> Any:
        import xgrammar as xgr

        if self._compiler is None:
            info = xgr.TokenizerInfo.from_huggingface(
                self.tokenizer, vocab_size=self.vocab_size, stop_token_ids=self.stop_ids
            )
            self._compiler = xgr.GrammarCompiler(info, max_threads=1)
            control = torch.zeros(self.vocab_size, dtype=torch.bool)
            stops = set(self.stop_ids)
            for i, raw in enumerate(info.decoded_vocab[: self.vocab_size]):
                control[i] = i not in stops and any(b < 0x20 for b in raw)
            self._control = control
        try:
            if kind == "json_object":
                return self._compiler.compile_json_schema(
                    schema, any_whitespace=False, strict_mode=False
                )
            return self._compiler.compile_json_schema(schema, any_whitespace=False)
        except (RuntimeError, ValueError, TypeError) as e:
            why = re.sub(r"^\[[\d:]+\] \S+:\d+: ", "", str(e).splitlines()[0])  # its C++ place
            raise InputError(
                f"response_format.json_schema.schema: xgrammar cannot compile this "
                f"JSON Schema: {why[:200]}"
            ) from None
