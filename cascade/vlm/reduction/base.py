"""What every reduction method shares: the per-call `ReductionConfig`, the `Reduction` base class
and its registry, the `Reduced` result, and `reduce_tokens`, which runs the after-tower methods.

A method is a `Reduction` subclass registered by name (`@register_reduction("name")`), in its own
module. Where it acts (`where`) decides who runs it:

- "after_tower": on the vision tower's merged output, one image at a time: `reduce(x, grid,
  config, ops)` returns the kept embeddings and, for each, the index of the original token whose
  position it takes (`reduce_tokens` calls it). A new method of this kind is one file.
- "before_tower": the family drops whole merge units before the tower (`tower`; a family opts in,
  `Family.tower_reduction`).
- "in_llm": inside the decoder, ranked by the question (`fastv`, `cascade.vlm.fastv`): never cached.
- "none": keeps every token.

Modules here import torch inside the methods only: the registry is read when a pipeline is
validated, which loads no model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

from ... import plugins
from ...errors import InputError, did_you_mean

if TYPE_CHECKING:
    import torch

    from ...kernels.dispatch import Ops

__all__ = [
    "ReductionConfig",
    "KeepRegions",
    "Reduction",
    "Selection",
    "Reduced",
    "register_reduction",
    "reduction_method",
    "reduction_names",
    "keep_count",
    "reduce_tokens",
    "unit_rows",
    "ReductionName",
    "Where",
]

Where = Literal["none", "after_tower", "before_tower", "in_llm"]


@dataclass(frozen=True)
class Reduced:
    """Kept embeddings [k, D] and the original index [k] (ascending) whose position each takes."""

    embeds: torch.Tensor
    index: torch.Tensor


class Reduction:
    """A training-free visual token reduction method. Subclass, set `where`, implement `reduce`
    (for "after_tower"), and register with `@register_reduction("name")`."""

    name: ClassVar[str] = ""
    where: ClassVar[Where] = "after_tower"
    # True for a method that selects across the frames of one call (`evs`: the units that
    # changed since the frame before), so an image's tokens depend on the others of its call
    sequence: ClassVar[bool] = False

    def reduce(
        self, x: torch.Tensor, grid: tuple[int, int, int], config: ReductionConfig, ops: Ops
    ) -> Reduced:
        """Reduce one image's merged visual tokens x [n, D] laid out on grid (t, h, w)."""
        raise NotImplementedError(
            f"reduction '{self.name}' acts {self.where}, not on the tower's output"
        )


class Selection(Reduction):
    """An after-tower method that keeps exactly `keep_count(n, keep_ratio)` of n tokens."""

    def reduce(
        self, x: torch.Tensor, grid: tuple[int, int, int], config: ReductionConfig, ops: Ops
    ) -> Reduced:
        import torch

        n = x.shape[0]
        k = keep_count(n, config.keep_ratio)
        if k == n:
            return Reduced(x, torch.arange(n, device=x.device))
        return self.select(x, k, config, ops)

    def select(self, x: torch.Tensor, k: int, config: ReductionConfig, ops: Ops) -> Reduced:
        """Keep k < n of the tokens x [n, D]."""
        raise NotImplementedError


def unit_rows(x: torch.Tensor) -> torch.Tensor:
    """Rows of x as float32 unit vectors (cosine similarity is then a dot product)."""
    import torch.nn.functional as F

    return F.normalize(x.float(), dim=-1, eps=1e-8)


def register_reduction(name: str):
    """Class decorator: register a `Reduction` subclass under `name` (a duplicate is an error)."""

    def wrap(cls: type[Reduction]) -> type[Reduction]:
        if not (isinstance(cls, type) and issubclass(cls, Reduction)):
            raise TypeError(f"@register_reduction('{name}') must decorate a Reduction subclass")
        cls.name = name
        return plugins.reductions.register(name, cls)

    return wrap


def reduction_names(where: Where | None = None) -> list[str]:
    """Registered methods (those acting `where`, when given), sorted."""
    return [
        n
        for n in plugins.reductions.names()
        if where is None or plugins.reductions[n].where == where
    ]


def reduction_method(name: str) -> type[Reduction]:
    """The method class registered under `name`; InputError with a suggestion otherwise."""
    cls = plugins.reductions.get(name)
    if cls is None:
        names = plugins.reductions.names()
        raise InputError(
            f"unknown reduction method '{name}'{did_you_mean(name, names)}; choose one of {names}"
        )
    return cls


ReductionName = Annotated[str, plugins.NameOf(plugins.reductions)]
"""A param or field naming a registered reduction method (checked when validated, listed by
`cascade stages` and JSON schema)."""


@dataclass(frozen=True)
class KeepRegions:
    """What one image's answer needs, for a reduction before the tower: `boxes` (x0, y0, x1, y1)
    in that image's own pixels, most needed first, on an image of `size` (width, height). The
    `tower` method keeps every merge unit a box overlaps, with a margin of one unit
    (`tower.evidence_units`). `lead`: how many of the first boxes are the question's target (and
    the lines on its row): they and their margins are kept before any other box, so under a
    tight budget the answer's line is whole, glyphs that reach past its box included. Part of the
    reduction's identity: another set of boxes is another prefix (and another tower output) in
    every cache keyed by `ReductionConfig.cache_key`."""

    size: tuple[int, int]
    boxes: tuple[tuple[float, float, float, float], ...]
    lead: int = 0

    def __post_init__(self):
        w, h = self.size
        if w < 1 or h < 1:
            raise InputError(
                f"KeepRegions.size must be a positive (width, height), got {self.size}"
            )
        for b in self.boxes:
            if len(b) != 4 or not (b[2] >= b[0] and b[3] >= b[1]):
                raise InputError(
                    f"KeepRegions box must be (x0, y0, x1, y1) with x1 >= x0 and y1 >= y0, got {b}"
                )
        if not 0 <= self.lead <= len(self.boxes):
            raise InputError(
                f"KeepRegions.lead counts leading boxes: 0 to {len(self.boxes)}, got {self.lead}"
            )


@dataclass(frozen=True)
class ReductionConfig:
    """How many visual tokens the LLM sees, and how they are chosen.

    method: a registered reduction (`reduction_names()`). keep_ratio: fraction of merged visual
    tokens kept, in (0, 1]. fastv_layer: FastV's K, the decoder layer after which visual tokens
    are dropped. visionzip_contextual: fraction of the kept budget spent on merged contextual
    tokens. dart_pivots: number of pivot tokens per image for `dart`. keep_regions: for a method
    before the tower, per image (in order) the `KeepRegions` its selection must keep, or None for
    an image without evidence (the method's own rule); None: no image has any.
    """

    method: str = "none"
    keep_ratio: float = 1.0
    fastv_layer: int = 2
    visionzip_contextual: float = 0.15
    dart_pivots: int = 8
    keep_regions: tuple[KeepRegions | None, ...] | None = None

    def __post_init__(self):
        where = reduction_method(self.method).where
        r = self.keep_ratio
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0.0 < r <= 1.0:
            raise InputError(f"keep_ratio must be a number in (0, 1], got {r!r}")
        if where == "none" and r != 1.0:
            raise InputError(
                f"method '{self.method}' keeps every token; keep_ratio {r} needs a "
                f"method such as {reduction_names('after_tower')} or 'fastv'"
            )
        if self.fastv_layer < 1:
            raise InputError(f"fastv_layer must be >= 1, got {self.fastv_layer}")
        if not 0.0 <= self.visionzip_contextual < 1.0:
            raise InputError(
                f"visionzip_contextual must be in [0, 1), got {self.visionzip_contextual}"
            )
        if self.dart_pivots < 1:
            raise InputError(f"dart_pivots must be >= 1, got {self.dart_pivots}")
        if self.keep_regions is not None and (
            where != "before_tower" or reduction_method(self.method).sequence
        ):
            raise InputError(
                f"keep_regions guide a reduction before the vision tower "
                f"by evidence ('tower'), not '{self.method}'"
            )

    @property
    def where(self) -> Where:
        """Where the method acts (`Reduction.where`)."""
        return reduction_method(self.method).where

    @property
    def is_identity(self) -> bool:
        """True when the LLM sees every visual token (keep 1.0 reproduces the unpruned model)."""
        return self.where == "none" or self.keep_ratio == 1.0

    @property
    def before_tower(self) -> bool:
        """True when the reduction drops patches before the vision tower (method `tower`)."""
        return self.where == "before_tower" and not self.is_identity

    @property
    def sequence_dependent(self) -> bool:
        """True when an image's tokens depend on the other frames of its call (`evs`)."""
        return reduction_method(self.method).sequence and not self.is_identity

    @property
    def question_dependent(self) -> bool:
        """FastV ranks tokens by the question's attention: its prefix cannot be cached."""
        return self.where == "in_llm" and not self.is_identity

    def cache_key(self) -> tuple:
        """The part of a KV prefix cache key that depends on the reduction (identity collapses)."""
        if self.is_identity:
            return ("none",)
        return (
            self.method,
            float(self.keep_ratio),
            self.visionzip_contextual,
            self.dart_pivots,
            self.keep_regions,
        )


def keep_count(n: int, keep_ratio: float) -> int:
    """Tokens kept out of n by the count-exact methods: round(n * r), at least 1."""
    return max(1, min(n, int(round(n * keep_ratio))))


def reduce_tokens(
    x: torch.Tensor, grid: tuple[int, int, int], config: ReductionConfig, ops: Ops | None = None
) -> Reduced:
    """Reduce one image's merged visual tokens x [n, D] laid out on grid (t, h, w), n = t*h*w,
    with the configured after-tower method. `ops`: the kernels the method may use (default: the
    `auto` choice for x's device)."""
    import torch

    if config.before_tower:
        raise ValueError(
            "the 'tower' reduction drops patches before the vision tower; its tokens "
            "come reduced from FamilyRuntime.encode(..., keep=), not from reduce_tokens"
        )
    if config.is_identity or config.where != "after_tower":
        return Reduced(x, torch.arange(x.shape[0], device=x.device))
    if ops is None:
        from ...kernels.dispatch import bind

        ops = bind("auto", x.device)
    return reduction_method(config.method)().reduce(x, grid, config, ops)
