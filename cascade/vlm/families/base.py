"""A model family: the one place that knows a VLM architecture, in two parts.

`Family`, built from a checkpoint's config and processor **without weights**, describes it:

- what an image costs the model: `image_cost(width, height)` (LLM tokens, tower patches, tower
  attention pairs), so `visual_tokens(w, h)`, token budgets and full-resolution baselines ask it
  instead of re-implementing its resize rule; `native_size`, the size its processor keeps;
- its preprocessing limits (`ImageLimits`: a pixel budget for Qwen, a longest edge for Idefics3;
  `resolution="full"` opens them to native resolution);
- its shapes (`shapes`: the LLM's and the vision tower's, `cascade.cost`), read off the
  architecture (built on the meta device when the weights are not loaded);
- which reductions it supports (`tower_reduction`: whether its tower can encode a subset).

`bind(model, ops)` gives its `FamilyRuntime` (`runtime.py`): the loaded model the runtime drives.
Its tiny random-weight checkpoint is a recipe beside `cascade.vlm.tiny` (`tiny_recipes.py`).

Adding a family is one module: a `Family` and a `FamilyRuntime` subclass, the family decorated
with `@register_family` (here under `cascade/vlm/families/`, which imports every module, or in any
package that registers through the `cascade.families` entry-point group).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import torch

from ... import plugins
from ...cost import DecoderShape, EncoderShape, encoder_flops
from ...errors import CascadeError, InputError
from ..reduction import reduction_method, reduction_names

if TYPE_CHECKING:
    from ...kernels.dispatch import Ops

__all__ = [
    "Family",
    "ImageLimits",
    "ImageCost",
    "ModelShapes",
    "FAMILIES",
    "register_family",
    "family_for",
    "load_family",
    "matmul_weights",
]

FAMILIES = plugins.families
"""Model type -> the `Family` class serving it (`cascade.plugins.families`)."""


def register_family(cls: type[Family]) -> type[Family]:
    """Class decorator: the family serves every `config.model_type` in `cls.model_types`."""
    for model_type in cls.model_types:
        FAMILIES.register(model_type, cls)
    return cls


def family_for(model_type: str) -> type[Family]:
    """The family class for a model type; unsupported types list what is supported."""
    cls = FAMILIES.get(model_type)
    if cls is None:
        raise CascadeError(
            f"model type '{model_type}' is not supported by the transformers "
            f"backend; supported model types: {FAMILIES.names()}"
        )
    return cls


def load_family(model: str, limits: ImageLimits | None = None) -> Family:
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
        return {
            k: v
            for k, v in (
                ("min_pixels", self.min_pixels),
                ("max_pixels", self.max_pixels),
                ("longest_edge", self.longest_edge),
            )
            if v is not None
        }


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


class Family(ABC):
    """The weightless description of one architecture family (e.g. Qwen2-VL and Qwen2.5-VL share
    one). Subclasses name their `FamilyRuntime` subclass in `runtime`."""

    model_types: ClassVar[tuple[str, ...]] = ()
    # ImageLimits fields (besides `resolution`) this family's preprocessing has.
    limit_names: ClassVar[tuple[str, ...]] = ()
    position_rows: ClassVar[int] = 1
    # Whether the runtime can drop merge units before the tower (a "before_tower" reduction such as
    # `tower`: `FamilyRuntime.tower_keep`, `tower_cost`, `encode(..., keep=)`).
    tower_reduction: ClassVar[bool] = False
    # The family's `FamilyRuntime` subclass (runtime.py, which builds on this module, not the
    # other way round).
    runtime: ClassVar[type]

    def __init__(self, config: Any, processor: Any, limits: ImageLimits | None = None):
        self.config, self.processor = config, processor
        self.tokenizer = processor.tokenizer
        self.limits = limits or ImageLimits()
        unknown = [k for k in self.limits.given() if k not in self.limit_names]
        if unknown:
            raise InputError(
                f"{type(self).__name__} ({config.model_type}) has no '{unknown[0]}' "
                f"image limit; its limits: {list(self.limit_names) or 'none'} "
                "(and resolution: default | full)"
            )
        self._apply_limits()

    def bind(self, model: Any, ops: Ops) -> Any:
        """The `FamilyRuntime` of `model`, a loaded checkpoint of this family, running `ops` (the
        kernels choice). The shapes are read off the loaded model from now on."""
        if "shapes" not in self.__dict__:
            self.__dict__["shapes"] = self.read_shapes(model)
        return self.runtime(self, model, ops)

    def with_limits(self, limits: ImageLimits) -> Family:
        """The same model under other image limits (its shapes are shared)."""
        other = type(self)(self.config, self.processor, limits)
        other.__dict__["shapes"] = self.shapes
        return other

    def supports(self, reduction: str) -> bool:
        """Whether the runtime can apply a registered reduction method to this family's models."""
        return reduction_method(reduction).where != "before_tower" or self.tower_reduction

    @property
    def reductions(self) -> list[str]:
        """The registered reduction methods this family supports."""
        return [m for m in reduction_names() if self.supports(m)]

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

    def resized(self, width: int, height: int) -> tuple[int, int]:
        """(height, width) the processor resizes a width x height image to (a family whose
        processor resizes says what to)."""
        raise NotImplementedError(
            f"{type(self).__name__} does not say what size its processor resizes an image to"
        )

    def native_size(self, width: int, height: int) -> tuple[int, int]:
        """The smallest (width, height), at least the given one, that the processor sends to the
        tower without resampling; a crop cut to it reaches the model pixel for pixel. Here: the
        size itself (a family whose processor resizes says what it keeps)."""
        return width, height

    def vision_flops(self, costs: list[ImageCost]) -> float:
        """Cost-model FLOPs of the vision tower (and merger) on these images."""
        return encoder_flops(
            self.shapes.vision,
            sum(c.patches for c in costs),
            sum(c.attention_pairs for c in costs),
            sum(c.tokens for c in costs),
        )

    @cached_property
    def shapes(self) -> ModelShapes:
        """The LLM's and the tower's shapes, read off the architecture built on the meta device
        (or off the loaded model, once bound)."""
        from transformers import AutoModelForImageTextToText

        with torch.device("meta"):
            return self.read_shapes(AutoModelForImageTextToText.from_config(self.config))

    def read_shapes(self, model: Any) -> ModelShapes:
        """The shapes of `model` (loaded, or built on the meta device)."""
        text = self.config.get_text_config(decoder=True)
        heads = int(text.num_attention_heads)
        head_dim = int(getattr(text, "head_dim", None) or text.hidden_size // heads)
        lm_head = self.lm_head_of(model)
        llm = DecoderShape(
            layers=int(text.num_hidden_layers),
            hidden=int(text.hidden_size),
            attention_width=heads * head_dim,
            linear_params=matmul_weights(self.text_model_of(model).layers),
            vocab=int(lm_head.weight.shape[0]),
        )
        return ModelShapes(llm, self._vision_shape(model))

    @abstractmethod
    def _vision_shape(self, model: Any) -> EncoderShape:
        """The tower's shape, read off `model` (loaded or on the meta device)."""

    # -- where the model's parts are (for shapes here, and for the runtime) ---------------------
    @staticmethod
    @abstractmethod
    def text_model_of(model: Any) -> Any:
        """The decoder stack of `model`: has embed_tokens, layers, norm, rotary_emb (a
        transformers class: Any to mypy, see pyproject.toml; torch types its parts `Tensor |
        Module`)."""

    @staticmethod
    def lm_head_of(model: Any) -> torch.nn.Linear:
        return model.lm_head

    @property
    def text_config(self) -> Any:
        return self.config.get_text_config(decoder=True)

    @property
    def image_token_id(self) -> int:
        return int(self.config.image_token_id)

    @abstractmethod
    def preprocessing_key(self) -> tuple:
        """Image-processor settings that change the visual tokens (part of the KV cache key)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, {self.limits})"
