"""A family bound to loaded weights: what the runtime drives (`Family.bind(model, ops)`).

`FamilyRuntime` preprocesses images (`preprocess`: one `ImageInputs` per image, so the runtime can
encode each distinct image once across a batch), expands image placeholders and computes the
*full* (unpruned) prefix's positions (`build_prefix`), runs the vision tower (`encode`) and exposes
the decoder so the runtime can prefill chunks into a KV cache and decode. It holds the loaded
model's `ops` (`cascade.kernels.dispatch.Ops`): the kernels choice, decided once at load.
Reduction, the prefix cache, sessions, batching and the bill are family-agnostic and live in the
runtime (`cascade.vlm.prefix`, `decode`, `transformers_backend`).

The unit of visual tokens is a *block*: one contiguous run of image placeholder tokens laid out on
a (t, h, w) grid. A Qwen image is one block; an Idefics3 image split into tiles is one block per
tile plus one for the downscaled global image. Reduction works block by block, on the features
`encode` returns; a family whose tower feeds the decoder more than one feature per visual token
(Qwen3-VL's DeepStack) returns them concatenated along the feature axis, so a reduction keeps or
merges all of a token's features together, and takes them apart in `split_features`.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ...errors import InputError
from .base import Family, ImageCost

if TYPE_CHECKING:
    from ...kernels.dispatch import Ops
    from ..reduction import KeepRegions

__all__ = ["FamilyRuntime", "ImageInputs", "PrefixInputs"]


@dataclass
class ImageInputs:
    """One preprocessed image: the vision tower's inputs for it alone (`tensors`, collated with
    other images' by `FamilyRuntime.collate`), the token grid (t, h, w) of each of its visual
    blocks, and whatever else the placeholder expansion needs (`meta`)."""

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


class FamilyRuntime(ABC):
    """A family's loaded model: subclass per family, next to its `Family` (which names it in
    `Family.runtime`). family: the weightless description; model: the transformers model; ops:
    the kernels it runs (preprocessing)."""

    def __init__(self, family: Family, model: Any, ops: Ops):
        self.family, self.model, self.ops = family, model, ops
        # transformers 5 renamed `past_key_values` to `cache`; accept both (transformers>=4.57).
        params = inspect.signature(self.text_model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"

    @property
    def text_model(self) -> Any:
        """The decoder stack (`Family.text_model_of`)."""
        return self.family.text_model_of(self.model)

    @property
    def lm_head(self) -> torch.nn.Linear:
        return self.family.lm_head_of(self.model)

    # the description's facts the runtime's callers read often
    @property
    def text_config(self) -> Any:
        return self.family.text_config

    @property
    def image_token_id(self) -> int:
        return self.family.image_token_id

    @property
    def position_rows(self) -> int:
        return self.family.position_rows

    @property
    def tokenizer(self) -> Any:
        return self.family.tokenizer

    # -- inputs ---------------------------------------------------------------------------------
    @abstractmethod
    def preprocess(self, images: list[Any]) -> list[ImageInputs]:
        """Preprocess PIL images (one `ImageInputs` each); raises InputError on images the image
        processor rejects."""

    def embedded_inputs(self, image: Any) -> ImageInputs:
        """The `ImageInputs` of a `cascade.artifacts.ImageEmbeds` (its grid; no pixels: the
        tower does not run on it), its embeddings checked against this model (InputError). The
        families that take embeddings override this."""
        raise InputError(
            f"{image.source}: image embeddings are not supported for the "
            f"{self.family.name} family; send the image"
        )

    @abstractmethod
    def collate(self, images: list[ImageInputs]) -> dict[str, Any]:
        """The tower inputs for several preprocessed images at once (what `encode` takes)."""

    @abstractmethod
    def build_prefix(self, prefix_text: str, images: list[ImageInputs]) -> PrefixInputs:
        """Tokenize the prefix with its image placeholders expanded, as the processor would."""

    @abstractmethod
    def encode(
        self, vision_inputs: dict[str, Any], keep: list[torch.Tensor] | None = None
    ) -> list[torch.Tensor]:
        """Run the vision tower (+ merger/connector) on collated inputs: one [n_b, F] tensor per
        visual block, image by image in order (F: the features per token, see module docstring).
        Families that support the `tower` reduction also take `keep` (per block, the merge units
        `tower_keep` chose) and return the features of the kept units only; the others are never
        given one (their `tower_keep` raises)."""

    def unit_pixels(self, vision_inputs: dict[str, Any]) -> list[torch.Tensor]:
        """Per visual block, its normalized patch values grouped per merge unit [units, F]
        (row-major over the merged grid): what a before-the-tower reduction selects from.
        Families without a before-the-tower reduction raise."""
        raise InputError(
            f"{self.family.name} models cannot drop merge units before the vision tower"
        )

    def tower_keep(
        self,
        vision_inputs: dict[str, Any],
        keep_ratio: float,
        regions: tuple[KeepRegions | None, ...] | None = None,
    ) -> list[torch.Tensor]:
        """Per visual block, the merge units (ascending indices into its merged tokens) a
        before-the-tower reduction keeps (`reduction.tower_select`), guided per image by
        `regions` (`ReductionConfig.keep_regions`). Families without it raise."""
        raise InputError(
            f"reduction 'tower' is not supported for {self.family.name} models: it "
            "drops merge units before the vision tower, which this family's tower "
            "cannot do"
        )

    def tower_cost(self, image: ImageInputs, keep: list[torch.Tensor]) -> ImageCost:
        """What the tower costs on one image encoding only the merge units `keep` (per block)."""
        raise InputError(f"reduction 'tower' is not supported for {self.family.name} models")

    def split_features(self, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(input embeddings [n, D], extra per-token features or None) of `encode`d features."""
        return feats, None

    def visual_kwargs(
        self, visual_mask: torch.Tensor, extra: torch.Tensor | None
    ) -> dict[str, Any]:
        """Extra keyword arguments of the decoder's forward for a chunk holding visual tokens
        (visual_mask [B, L] bool; extra: their extra features in row-major mask order)."""
        return {}

    def reduced_positions(
        self, positions: torch.Tensor, keep: torch.Tensor
    ) -> tuple[torch.Tensor, int]:
        """(positions [R, L'] of the kept tokens, next text position) after dropping visual tokens
        (keep: [L] bool). Default: kept tokens keep their original positions (M-RoPE's (t, h, w)
        must not move) and text after the prefix continues at max(position) + 1, as unpruned."""
        return positions[:, keep], int(positions.max()) + 1

    def text_positions(self, start: int, n: int) -> torch.Tensor:
        """Positions [R, n] of n text tokens following a context whose next position is `start`."""
        rows = self.family.position_rows
        return (torch.arange(n, device=self.device) + start).unsqueeze(0).expand(rows, n)

    def lm_position_ids(self, positions: torch.Tensor) -> torch.Tensor:
        """[R, L] (batch of one) or [R, B, L] positions in the layout the decoder's forward
        takes."""
        one_row = self.family.position_rows == 1
        if positions.dim() == 3:
            return positions[0] if one_row else positions
        return positions[:1] if one_row else positions.unsqueeze(1)

    # -- decoder calls ----------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.lm_head.weight.device

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.text_model.embed_tokens(input_ids)

    def forward(
        self,
        embeds: torch.Tensor,
        positions: torch.Tensor,
        cache: Any,
        attention_mask: torch.Tensor | None = None,
        **visual: Any,
    ) -> torch.Tensor:
        """Run the decoder on [B, n, D] embeddings appended to `cache`; returns last-layer hidden.
        positions: [R, n] for a batch of one, [R, B, n] otherwise; attention_mask: [B, past + n]
        (1 = real token) for left-padded batches, None when nothing is padded; visual: what
        `visual_kwargs` gave for a chunk that holds visual tokens."""
        extra = {} if attention_mask is None else {"attention_mask": attention_mask}
        out = self.text_model(
            inputs_embeds=embeds,
            position_ids=self.lm_position_ids(positions),
            use_cache=True,
            **{self.cache_kw: cache},
            **extra,
            **visual,
        )
        return out.last_hidden_state

    def rotary(
        self, hidden: torch.Tensor, positions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin) for explicit layer-by-layer runs (FastV)."""
        return self.text_model.rotary_emb(hidden, self.lm_position_ids(positions))

    def query_states(self, layer: torch.nn.Module, normed: torch.Tensor) -> torch.Tensor:
        """[B, H, n, head_dim] queries of one decoder layer for its normed input (before RoPE)."""
        attn: Any = layer.self_attn  # a transformers attention module: q_proj, head_dim
        q = attn.q_proj(normed)
        return q.view(*q.shape[:-1], -1, attn.head_dim).transpose(1, 2)

    def after_layer(
        self,
        index: int,
        hidden: torch.Tensor,
        visual_rows: torch.Tensor,
        extra: torch.Tensor | None,
    ) -> torch.Tensor:
        """Hidden states after decoder layer `index` in a layer-by-layer run (FastV): what the
        model's own forward adds there for the visual tokens at `visual_rows` (their extra
        features `extra`, in the same order). Default: nothing."""
        return hidden

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.family!r})"
