"""What every KV press shares: the model's KV settings (`KVConfig`), the `Press` base class and
its registry, and `press_block`, which scores and keeps one prefilled block's KV.

A press runs after a block of the prefix is prefilled (`cascade.vlm.prefix`), once per layer and
per KV head (the query heads of a GQA group pool their scores): `score` rates every token of the
block, then the highest-rated `keep` fraction of the candidates stays, with the tokens the press
always keeps (its window; every text token for a press that only presses visual tokens). The
kept keys were rotated at their own positions when they were computed, so dropping others moves
nothing: the next token's position (the prefix's `next_pos`) is unchanged. Every head keeps the
same number of tokens, so all layers keep one length and masks stay those of an unpressed cache.

Modules here import torch inside the functions only: the registry is read when a pipeline is
validated, which loads no model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ... import plugins
from ...errors import InputError, did_you_mean

if TYPE_CHECKING:
    import torch

__all__ = ["KVConfig", "Press", "PressName", "press_block", "press_method", "register_press"]

PressName = Annotated[str, plugins.NameOf(plugins.presses)]
"""A field naming a registered press (checked when validated)."""


class KVConfig(BaseModel):
    """How a model keeps its KV (YAML `models.<name>.kv`, `VLM.load(kv=...)`).

    dtype: how KV prefix cache entries are stored: "auto" (the model's dtype), "int8" (per-channel
    keys, per-token values) or "int4" (KIVI: groups of `group_size`, the last `residual` tokens of
    an entry in full precision). press: a registered press (`press_names()`), applied to every
    image block of a prefix after its prefill; keep: the fraction of its candidates a press keeps;
    window: the observation window (the block's last tokens, whose queries score the rest; always
    kept by `snapkv`); seed: the `random` press's seed.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    dtype: Literal["auto", "int8", "int4"] = "auto"
    press: PressName = "none"
    keep: float = Field(1.0, gt=0.0, le=1.0)
    window: int = Field(8, ge=1)
    group_size: int = Field(64, ge=2)
    residual: int = Field(32, ge=0)
    seed: int = 0

    @model_validator(mode="after")
    def _group_size_is_a_power_of_two(self) -> KVConfig:
        if self.group_size & (self.group_size - 1):
            raise ValueError(f"kv.group_size must be a power of two, got {self.group_size}")
        return self

    @property
    def is_identity(self) -> bool:
        """True when the press keeps every token."""
        return self.press == "none" or self.keep >= 1.0

    def cache_key(self) -> tuple:
        """The part of a KV prefix cache key that the press decides (empty for the identity, so
        unpressed keys are those of a model without the setting)."""
        if self.is_identity:
            return ()
        window = self.window if press_method(self.press).needs_queries else None
        return (f"press={self.press}", float(self.keep), window, self.seed)


class Press:
    """A KV press. Subclass, implement `score`, set `needs_queries` (the window's queries are then
    captured during the prefill) and `visual_only` (text is never a candidate), and register with
    `@register_press("name")`."""

    name: ClassVar[str] = ""
    needs_queries: ClassVar[bool] = False
    visual_only: ClassVar[bool] = False
    keeps_window: ClassVar[bool] = False

    def score(
        self,
        keys: torch.Tensor,
        queries: torch.Tensor | None,
        scale: float,
        layer: int,
        config: KVConfig,
    ) -> torch.Tensor:
        """Scores [kv_heads, seq] (higher: kept first) of one layer's block keys [1, kv_heads, seq,
        head_dim]; queries: the window's rotated queries [1, q_heads, window, head_dim] when
        `needs_queries`; scale: the layer's softmax scale."""
        raise NotImplementedError


def register_press(name: str):
    """Class decorator: register a `Press` subclass under `name` (a duplicate is an error)."""

    def wrap(cls: type[Press]) -> type[Press]:
        if not (isinstance(cls, type) and issubclass(cls, Press)):
            raise TypeError(f"@register_press('{name}') must decorate a Press subclass")
        cls.name = name
        return plugins.presses.register(name, cls)

    return wrap


def press_method(name: str) -> type[Press]:
    """The press registered under `name`; InputError with a suggestion otherwise."""
    cls = plugins.presses.get(name)
    if cls is None:
        names = plugins.presses.names()
        raise InputError(
            f"unknown KV press '{name}'{did_you_mean(name, names)}; choose one of {names}"
        )
    return cls


def press_block(
    config: KVConfig,
    layers: list[tuple[torch.Tensor, torch.Tensor]],
    visual: torch.Tensor,
    queries: list[tuple[torch.Tensor, float]] | None = None,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """One block's per-layer (k, v) [1, kv_heads, seq, head_dim] pressed: each head keeps the same
    number of tokens, in their order. visual [seq]: which tokens are visual; queries: per layer
    the window's rotated queries and the layer's scale (a press that needs them). The given
    tensors are returned as they are when nothing would be dropped (keep 1.0: bit for bit)."""
    import torch

    if config.is_identity or not layers:
        return layers
    press = press_method(config.press)()
    seq = layers[0][0].shape[2]
    forced = torch.zeros(seq, dtype=torch.bool, device=visual.device)
    if press.visual_only:
        forced |= ~visual
    if press.keeps_window:
        forced[max(0, seq - config.window) :] = True
    candidates = (~forced).nonzero().squeeze(1)
    n = candidates.numel()
    budget = max(1, min(n, int(round(n * config.keep)))) if n else 0
    if budget == n:
        return layers
    if press.needs_queries and (queries is None or len(queries) != len(layers)):
        raise ValueError(f"press '{config.press}' needs the window queries of every layer")
    always = forced.nonzero().squeeze(1)
    out = []
    for i, (k, v) in enumerate(layers):
        q, scale = queries[i] if queries is not None else (None, 1.0)
        scores = press.score(k, q, scale, i, config)[:, candidates]
        top = candidates[scores.topk(budget, dim=-1).indices]  # [kv_heads, budget]
        index = torch.cat([always.expand(top.shape[0], -1), top], dim=1).sort(dim=1).values
        gather = index[None, :, :, None].expand(1, -1, -1, k.shape[-1])
        out.append((k.gather(2, gather), v.gather(2, gather)))
    return out
