"""What the generic runtime needs from one model family: adding a family is one file.

A family preprocesses images (`preprocess`: one `ImageInputs` per image, so the runtime can encode
each distinct image once across a batch), turns a prefix text plus those images into token ids
with the image placeholders expanded (`build_prefix`), runs the vision tower (`encode`), computes
the positions the language model expects for the *full* (unpruned) prefix, and exposes the decoder
so the runtime can prefill chunks into a KV cache and decode greedily. Everything else (reduction,
prefix cache, sessions, batching, accounting) is family-agnostic and lives in the runtime.

The unit of visual tokens is a *block*: one contiguous run of image placeholder tokens laid out on
a (t, h, w) grid. A Qwen2-VL image is one block; an Idefics3 image split into tiles is one block
per tile plus one for the downscaled global image. Reduction works block by block.
"""
from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from ..reduction import METHODS


@dataclass
class ImageInputs:
    """One preprocessed image: the vision tower's inputs for it alone (`tensors`, collated with
    other images' by `Family.collate`), the token grid (t, h, w) of each of its visual blocks, and
    whatever else the placeholder expansion needs (`meta`)."""

    tensors: dict[str, torch.Tensor]
    blocks: list[tuple[int, int, int]]
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class PrefixInputs:
    """The tokenized prefix (system prompt + images) before any reduction.

    input_ids [L]; positions [R, L] (R = 3 for M-RoPE, 1 for plain RoPE); spans: per visual block
    (module docstring) the [start, end) range of its placeholder tokens in input_ids, in order;
    grids: per block its token grid (t, h, w) with t*h*w == end - start; vision_inputs: what
    `encode` consumes; images: the per-image inputs the prefix was built from.
    """

    input_ids: torch.Tensor
    positions: torch.Tensor
    spans: list[tuple[int, int]]
    grids: list[tuple[int, int, int]]
    vision_inputs: dict[str, Any]
    images: list[ImageInputs] = field(default_factory=list)


class Family(ABC):
    """Adapter for one architecture family (e.g. Qwen2-VL and Qwen2.5-VL share one)."""

    model_types: ClassVar[tuple[str, ...]] = ()
    # Reduction methods this family supports (cascade.vlm.reduction.METHODS by default); the
    # runtime refuses others with an InputError naming these.
    reductions: ClassVar[tuple[str, ...]] = METHODS

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
    def preprocess(self, images: list[Any]) -> list[ImageInputs]:
        """Preprocess PIL images (one `ImageInputs` each); raises InputError on images the image
        processor rejects."""

    @abstractmethod
    def collate(self, images: list[ImageInputs]) -> dict[str, Any]:
        """The tower inputs for several preprocessed images at once (what `encode` takes)."""

    @abstractmethod
    def build_prefix(self, prefix_text: str, images: list[ImageInputs]) -> PrefixInputs:
        """Tokenize the prefix with its image placeholders expanded, as the processor would."""

    @abstractmethod
    def encode(self, vision_inputs: dict[str, Any]) -> list[torch.Tensor]:
        """Run the vision tower (+ merger/connector) on collated inputs: one [n_b, D] tensor per
        visual block, image by image in order."""

    def prepare_prefix(self, prefix_text: str, images: list[Any]) -> PrefixInputs:
        """Tokenize the prefix with its image placeholders expanded; PIL images in."""
        return self.build_prefix(prefix_text, self.preprocess(images))

    def encode_images(self, prefix: PrefixInputs) -> list[torch.Tensor]:
        """Run the vision tower on a prefix's images: one [n_b, D] tensor per block."""
        return self.encode(prefix.vision_inputs)

    def reduced_positions(self, positions: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, int]:
        """(positions [R, L'] of the kept tokens, next text position) after dropping visual tokens
        (keep: [L] bool). Default: kept tokens keep their original positions (M-RoPE's (t, h, w)
        must not move) and text after the prefix continues at max(position) + 1, as unpruned."""
        return positions[:, keep], int(positions.max()) + 1

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
        """[R, L] (batch of one) or [R, B, L] positions in the layout the decoder's forward takes."""
        if positions.dim() == 3:
            return positions[0] if self.position_rows == 1 else positions
        return positions[:1] if self.position_rows == 1 else positions.unsqueeze(1)

    # -- decoder calls ----------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.lm_head.weight.device

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.text_model.embed_tokens(input_ids)

    def forward(self, embeds: torch.Tensor, positions: torch.Tensor, cache: Any,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Run the decoder on [B, n, D] embeddings appended to `cache`; returns last-layer hidden.
        positions: [R, n] for a batch of one, [R, B, n] otherwise; attention_mask: [B, past + n]
        (1 = real token) for left-padded batches, None when nothing is padded."""
        extra = {} if attention_mask is None else {"attention_mask": attention_mask}
        out = self.text_model(inputs_embeds=embeds, position_ids=self.lm_position_ids(positions),
                              use_cache=True, **{self.cache_kw: cache}, **extra)
        return out.last_hidden_state

    def rotary(self, hidden: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin) for explicit layer-by-layer runs (FastV)."""
        return self.text_model.rotary_emb(hidden, self.lm_position_ids(positions))
