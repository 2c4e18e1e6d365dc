"""A model family: the one place that knows a VLM architecture. Adding a family is one file.

A family is built from a checkpoint's config and processor, **without weights**, and then knows:

- what an image costs the model: `image_cost(width, height)` (LLM tokens, tower patches, tower
  attention pairs), so `visual_tokens(w, h)`, token budgets and full-resolution baselines ask it
  instead of re-implementing its resize rule;
- its preprocessing limits (`ImageLimits`: a pixel budget for Qwen, a longest edge for Idefics3;
  `resolution="full"` opens them to native resolution);
- its shapes (`shapes`: the LLM's and the vision tower's, `cascade.cost`), read off the
  architecture (built on the meta device when the weights are not loaded);
- its tiny random-weight recipe (`tiny`), used by `cascade.vlm.build_tiny_vlm`.

`bind(model)` attaches the loaded weights; then it preprocesses images (`preprocess`: one
`ImageInputs` per image, so the runtime can encode each distinct image once across a batch),
expands image placeholders and computes the *full* (unpruned) prefix's positions (`build_prefix`),
runs the vision tower (`encode`) and exposes the decoder so the runtime can prefill chunks into a
KV cache and decode. Reduction, the prefix cache, sessions, batching and the bill are
family-agnostic and live in the runtime.

The unit of visual tokens is a *block*: one contiguous run of image placeholder tokens laid out on
a (t, h, w) grid. A Qwen image is one block; an Idefics3 image split into tiles is one block per
tile plus one for the downscaled global image. Reduction works block by block, on the features
`encode` returns; a family whose tower feeds the decoder more than one feature per visual token
(Qwen3-VL's DeepStack) returns them concatenated along the feature axis, so a reduction keeps or
merges all of a token's features together, and takes them apart in `split_features`.

Register a family with `@register_family` in its own module under `cascade/vlm/families/`; the
package imports every module there.
"""
from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar, Literal

import torch

from ...cost import DecoderShape, EncoderShape, encoder_flops
from ... import plugins
from ...errors import CascadeError, InputError
from ..reduction import METHODS, TOWER_METHODS

__all__ = ["Family", "ImageInputs", "PrefixInputs", "ImageLimits", "ImageCost", "ModelShapes",
           "FAMILIES", "register_family", "family_for", "load_family", "matmul_weights"]

FAMILIES = plugins.families
"""Model type -> the `Family` class serving it (`cascade.plugins.families`)."""


def register_family(cls: type["Family"]) -> type["Family"]:
    """Class decorator: the family serves every `config.model_type` in `cls.model_types`."""
    for model_type in cls.model_types:
        FAMILIES.register(model_type, cls)
    return cls


def family_for(model_type: str) -> type["Family"]:
    """The family class for a model type; unsupported types list what is supported."""
    cls = FAMILIES.get(model_type)
    if cls is None:
        raise CascadeError(f"model type '{model_type}' is not supported by the transformers "
                           f"backend; supported model types: {FAMILIES.names()}")
    return cls


def load_family(model: str, limits: "ImageLimits | None" = None) -> "Family":
    """The family of a checkpoint (hub id or folder), from its config and processor: no weights."""
    from transformers import AutoConfig, AutoProcessor

    try:
        config = AutoConfig.from_pretrained(model)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot load VLM '{model}': {e}") from e
    return family_for(config.model_type)(config, AutoProcessor.from_pretrained(model), limits)


def matmul_weights(*modules: torch.nn.Module) -> int:
    """Weights of every matmul in `modules`: linear layers and patchifying convolutions (a conv
    whose stride is its kernel is one matmul per patch)."""
    kinds = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
    return sum(m.weight.numel() for mod in modules for m in mod.modules() if isinstance(m, kinds))


@dataclass(frozen=True)
class ImageLimits:
    """How large images are made before the tower. resolution: "default" keeps the processor's
    own limits, "full" opens them as far as the family allows (native resolution; the
    full-resolution baseline); the other fields override one limit each, for the families that
    have it (a Qwen pixel budget; Idefics3's longest edge)."""

    resolution: Literal["default", "full"] = "default"
    min_pixels: int | None = None
    max_pixels: int | None = None
    longest_edge: int | None = None

    def given(self) -> dict[str, int]:
        return {k: v for k, v in (("min_pixels", self.min_pixels), ("max_pixels", self.max_pixels),
                                  ("longest_edge", self.longest_edge)) if v is not None}


@dataclass(frozen=True)
class ImageCost:
    """What one image costs a model: tokens the LLM reads, patches the tower encodes, and the
    tower's (query, key) attention pairs summed over its blocks."""

    tokens: int
    patches: int
    attention_pairs: float


@dataclass(frozen=True)
class ModelShapes:
    llm: DecoderShape
    vision: EncoderShape


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
    # Reduction methods this family supports; the runtime refuses others with an InputError.
    # Methods that act before the tower (TOWER_METHODS) need `tower_keep`, `tower_cost` and
    # `encode(..., keep=)`, so a family opts in to them.
    reductions: ClassVar[tuple[str, ...]] = tuple(m for m in METHODS if m not in TOWER_METHODS)
    # ImageLimits fields (besides `resolution`) this family's preprocessing has.
    limit_names: ClassVar[tuple[str, ...]] = ()
    position_rows: ClassVar[int] = 1
    # Model types `tiny` can build (default: all of `model_types`).
    tiny_types: ClassVar[tuple[str, ...] | None] = None

    def __init__(self, config: Any, processor: Any, limits: ImageLimits | None = None):
        self.config, self.processor = config, processor
        self.tokenizer = processor.tokenizer
        self.model: Any = None
        self.kernels = "auto"
        self.limits = limits or ImageLimits()
        unknown = [k for k in self.limits.given() if k not in self.limit_names]
        if unknown:
            raise InputError(f"{type(self).__name__} ({config.model_type}) has no '{unknown[0]}' "
                             f"image limit; its limits: {list(self.limit_names) or 'none'} "
                             "(and resolution: default | full)")
        self._apply_limits()

    def bind(self, model: Any, kernels: str = "auto") -> "Family":
        """Attach the loaded weights (and the cascade.kernels impl preprocessing uses)."""
        self.model, self.kernels = model, kernels
        # transformers 5 renamed `past_key_values` to `cache`; accept both (transformers>=4.57).
        params = inspect.signature(self.text_model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"
        return self

    def with_limits(self, limits: ImageLimits) -> "Family":
        """The same model under other image limits (the weights, if bound, are shared)."""
        other = type(self)(self.config, self.processor, limits)
        if self.model is not None:
            other.bind(self.model, self.kernels)
        other.__dict__["shapes"] = self.shapes
        return other

    @property
    def name(self) -> str:
        return str(self.config.model_type)

    # -- what the family knows without weights -----------------------------------------------------
    @abstractmethod
    def _apply_limits(self) -> None:
        """Turn `self.limits` into the processor settings preprocessing and `image_cost` use."""

    @abstractmethod
    def image_cost(self, width: int, height: int) -> ImageCost:
        """Tokens, tower patches and tower attention pairs of one width x height image, under this
        family's limits: exactly what `preprocess` + `encode` produce for it."""

    def visual_tokens(self, width: int, height: int) -> int:
        """Visual tokens the LLM reads for one width x height image (before any reduction)."""
        return self.image_cost(int(width), int(height)).tokens

    def native_size(self, width: int, height: int) -> tuple[int, int]:
        """The smallest (width, height), at least the given one, that the processor sends to the
        tower without resampling; a crop cut to it reaches the model pixel for pixel. Here: the
        size itself (a family whose processor resizes says what it keeps)."""
        return width, height

    def vision_flops(self, costs: list[ImageCost]) -> float:
        """Cost-model FLOPs of the vision tower (and merger) on these images."""
        return encoder_flops(self.shapes.vision, sum(c.patches for c in costs),
                             sum(c.attention_pairs for c in costs), sum(c.tokens for c in costs))

    @cached_property
    def shapes(self) -> ModelShapes:
        """The LLM's and the tower's shapes, read off the loaded model or, without weights, off the
        architecture built on the meta device."""
        model = self.model
        if model is None:
            from transformers import AutoModelForImageTextToText

            with torch.device("meta"):
                model = AutoModelForImageTextToText.from_config(self.config)
        text = self.config.get_text_config(decoder=True)
        heads = int(text.num_attention_heads)
        head_dim = int(getattr(text, "head_dim", None) or text.hidden_size // heads)
        lm_head = self._lm_head(model)
        llm = DecoderShape(layers=int(text.num_hidden_layers), hidden=int(text.hidden_size),
                           attention_width=heads * head_dim,
                           linear_params=matmul_weights(self._text_model(model).layers),
                           vocab=int(lm_head.weight.shape[0]))
        return ModelShapes(llm, self._vision_shape(model))

    @abstractmethod
    def _vision_shape(self, model: Any) -> EncoderShape:
        """The tower's shape, read off `model` (loaded or on the meta device)."""

    @classmethod
    @abstractmethod
    def tiny(cls, model_type: str, shape: dict[str, Any], tokenizer_for) -> tuple[Any, Any]:
        """(config, processor) of a random-weight checkpoint of `model_type` (`cascade.vlm.tiny`):
        `shape` holds the sizes, `tokenizer_for(special_tokens, eos, chat_template)` trains a
        byte-level BPE with the family's special tokens."""

    # -- model parts the runtime drives ---------------------------------------------------------
    @staticmethod
    @abstractmethod
    def _text_model(model: Any) -> torch.nn.Module:
        """The decoder stack of `model`: has embed_tokens, layers, norm, rotary_emb."""

    @staticmethod
    def _lm_head(model: Any) -> torch.nn.Module:
        return model.lm_head

    @property
    def text_model(self) -> torch.nn.Module:
        return self._text_model(self.model)

    @property
    def lm_head(self) -> torch.nn.Module:
        return self._lm_head(self.model)

    @property
    def text_config(self) -> Any:
        return self.config.get_text_config(decoder=True)

    @property
    def image_token_id(self) -> int:
        return int(self.config.image_token_id)

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
        """Run the vision tower (+ merger/connector) on collated inputs: one [n_b, F] tensor per
        visual block, image by image in order (F: the features per token, see module docstring).
        Families that support the `tower` reduction also take `keep` (per block, the merge units
        `tower_keep` chose) and return the features of the kept units only."""

    def tower_keep(self, vision_inputs: dict[str, Any], keep_ratio: float) -> list[torch.Tensor]:
        """Per visual block, the merge units (ascending indices into its merged tokens) a
        before-the-tower reduction keeps (`reduction.tower_select`). Families without it raise."""
        raise InputError(f"reduction 'tower' is not supported for {self.name} models: it drops "
                         "merge units before the vision tower, which this family's tower cannot do")

    def tower_cost(self, image: "ImageInputs", keep: list[torch.Tensor]) -> ImageCost:
        """What the tower costs on one image encoding only the merge units `keep` (per block)."""
        raise InputError(f"reduction 'tower' is not supported for {self.name} models")

    def split_features(self, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(input embeddings [n, D], extra per-token features or None) of `encode`d features."""
        return feats, None

    def visual_kwargs(self, visual_mask: torch.Tensor, extra: torch.Tensor | None) -> dict[str, Any]:
        """Extra keyword arguments of the decoder's forward for a chunk holding visual tokens
        (visual_mask [B, L] bool; extra: their extra features in row-major mask order)."""
        return {}

    @abstractmethod
    def preprocessing_key(self) -> tuple:
        """Image-processor settings that change the visual tokens (part of the KV cache key)."""

    def reduced_positions(self, positions: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, int]:
        """(positions [R, L'] of the kept tokens, next text position) after dropping visual tokens
        (keep: [L] bool). Default: kept tokens keep their original positions (M-RoPE's (t, h, w)
        must not move) and text after the prefix continues at max(position) + 1, as unpruned."""
        return positions[:, keep], int(positions.max()) + 1

    def text_positions(self, start: int, n: int) -> torch.Tensor:
        """Positions [R, n] of n text tokens following a context whose next position is `start`."""
        return (torch.arange(n, device=self.device) + start).unsqueeze(0).expand(self.position_rows, n)

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
                attention_mask: torch.Tensor | None = None, **visual: Any) -> torch.Tensor:
        """Run the decoder on [B, n, D] embeddings appended to `cache`; returns last-layer hidden.
        positions: [R, n] for a batch of one, [R, B, n] otherwise; attention_mask: [B, past + n]
        (1 = real token) for left-padded batches, None when nothing is padded; visual: what
        `visual_kwargs` gave for a chunk that holds visual tokens."""
        extra = {} if attention_mask is None else {"attention_mask": attention_mask}
        out = self.text_model(inputs_embeds=embeds, position_ids=self.lm_position_ids(positions),
                              use_cache=True, **{self.cache_kw: cache}, **extra, **visual)
        return out.last_hidden_state

    def rotary(self, hidden: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin) for explicit layer-by-layer runs (FastV)."""
        return self.text_model.rotary_emb(hidden, self.lm_position_ids(positions))

    def query_states(self, layer: torch.nn.Module, normed: torch.Tensor) -> torch.Tensor:
        """[B, H, n, head_dim] queries of one decoder layer for its normed input (before RoPE)."""
        attn = layer.self_attn
        q = attn.q_proj(normed)
        return q.view(*q.shape[:-1], -1, attn.head_dim).transpose(1, 2)

    def after_layer(self, index: int, hidden: torch.Tensor, visual_rows: torch.Tensor,
                    extra: torch.Tensor | None) -> torch.Tensor:
        """Hidden states after decoder layer `index` in a layer-by-layer run (FastV): what the
        model's own forward adds there for the visual tokens at `visual_rows` (their extra
        features `extra`, in the same order). Default: nothing."""
        return hidden

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, {self.limits})"
