"""What the generic runtime needs from one model family: adding a family is one file.

A family turns a prefix text plus images into token ids, runs the vision tower, computes the
positions the language model expects for the *full* (unpruned) prefix, and exposes the decoder so
the runtime can prefill chunks into a KV cache and decode greedily. Everything else (reduction,
prefix cache, sessions, accounting) is family-agnostic and lives in the runtime.
"""
from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import torch


@dataclass
class PrefixInputs:
    """The tokenized prefix (system prompt + images) before any reduction.

    input_ids [L]; positions [R, L] (R = 3 for M-RoPE, 1 for plain RoPE); spans: per image the
    [start, end) range of its placeholder tokens in input_ids; grids: per image the merged token
    grid (t, h, w) with t*h*w == end - start; vision_inputs: what `encode_images` consumes.
    """

    input_ids: torch.Tensor
    positions: torch.Tensor
    spans: list[tuple[int, int]]
    grids: list[tuple[int, int, int]]
    vision_inputs: dict[str, Any]


class Family(ABC):
    """Adapter for one architecture family (e.g. Qwen2-VL and Qwen2.5-VL share one)."""

    model_types: ClassVar[tuple[str, ...]] = ()

    def __init__(self, model: Any, processor: Any, kernels: str = "auto"):
        self.model, self.processor = model, processor
        self.kernels = kernels  # impl of the cascade.kernels ops a family uses (preprocessing)
        self.tokenizer = processor.tokenizer
        # transformers 5 renamed `past_key_values` to `cache`; accept both so the pinned
        # transformers>=4.57 range keeps working.
        params = inspect.signature(self.text_model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"

    # -- model parts the runtime drives ---------------------------------------------------------
    @property
    @abstractmethod
    def text_model(self) -> torch.nn.Module:
        """The decoder stack: has embed_tokens, layers, norm, rotary_emb."""

    @property
    @abstractmethod
    def lm_head(self) -> torch.nn.Module: ...

    @property
    def text_config(self) -> Any:
        return self.model.config.get_text_config(decoder=True)

    @property
    def image_token_id(self) -> int:
        return int(self.model.config.image_token_id)

    # -- inputs ---------------------------------------------------------------------------------
    @abstractmethod
    def prepare_prefix(self, prefix_text: str, images: list[Any]) -> PrefixInputs:
        """Tokenize the prefix with its image placeholders expanded; PIL images in."""

    @abstractmethod
    def encode_images(self, prefix: PrefixInputs) -> list[torch.Tensor]:
        """Run the vision tower (+ merger): one [n_i, D] tensor per image."""

    def set_pixel_budget(self, min_pixels: int | None = None, max_pixels: int | None = None) -> None:
        """Cap (and floor) the pixels per image, where the family resizes images dynamically."""
        from ...errors import InputError

        raise InputError(f"{type(self).__name__} has no per-image pixel budget to set")

    @abstractmethod
    def preprocessing_key(self) -> tuple:
        """Image-processor settings that change the visual tokens (part of the KV cache key)."""

    def text_positions(self, start: int, n: int) -> torch.Tensor:
        """Positions [R, n] of n text tokens following a context whose next position is `start`."""
        rows = self.position_rows
        return (torch.arange(n, device=self.device) + start).unsqueeze(0).expand(rows, n)

    position_rows: ClassVar[int] = 1

    def lm_position_ids(self, positions: torch.Tensor) -> torch.Tensor:
        """[R, L] positions in the layout the decoder's forward takes (batch of one)."""
        return positions[:1] if self.position_rows == 1 else positions.unsqueeze(1)

    # -- decoder calls ----------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.lm_head.weight.device

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.text_model.embed_tokens(input_ids)

    def forward(self, embeds: torch.Tensor, positions: torch.Tensor, cache: Any) -> torch.Tensor:
        """Run the decoder on [1, n, D] embeddings appended to `cache`; returns last-layer hidden."""
        out = self.text_model(inputs_embeds=embeds, position_ids=self.lm_position_ids(positions),
                              use_cache=True, **{self.cache_kw: cache})
        return out.last_hidden_state

    def rotary(self, hidden: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin) for explicit layer-by-layer runs (FastV)."""
        return self.text_model.rotary_emb(hidden, self.lm_position_ids(positions))
