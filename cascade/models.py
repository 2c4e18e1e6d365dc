"""Models a pipeline declares (`models:` in its YAML) and the stages that use them.

    models:
      vlm:
        id: Qwen/Qwen2-VL-2B-Instruct     # hub id or local folder (openai: the served model name)
        device: cuda
        kv_cache_bytes: 4294967296
        reduction: divprune               # defaults for the stages that use this model
        keep_ratio: 0.25
    stages:
      answer: {type: vlm_answer, params: {model: vlm}, ...}

What an entry may say depends on its `backend` (`cascade.vlm.options`: the fields every backend
shares, and each backend's own; a backend a plugin registers is declared the same way).
A stage names the model it uses with a `ModelName` param (`model: vlm`); loading a pipeline checks
every name (did-you-mean) without loading anything. The family comes from the checkpoint's config
(`model_type`). The pipeline hands every stage its `Models`; `stage.model("vlm")` is a
`DeclaredModel`: its `family` (config and processor, no weights: visual tokens per image, shapes,
limits) for stages that only price images (token budgets, baselines), and its loaded `vlm` for
stages that run it. Loading is shared: one instance per declaration per process, so two stages,
two pipelines or two questions never load the same model twice. A loaded model is thread-safe
(the transformers backend locks its prefix work and decodes concurrent calls in one continuous
batch; the openai backend is an HTTP client), so stages call it without a lock of their own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel

from .errors import CascadeError, did_you_mean
from .vlm.options import ModelSpec

if TYPE_CHECKING:
    from .vlm.backend import VLM
    from .vlm.families import Family
    from .vlm.reduction import ReductionConfig

__all__ = ["ModelSpec", "ModelName", "Models", "DeclaredModel", "model_params", "release_models"]


class _ModelRef:
    """Marks a stage param whose value names a declared model (see `ModelName`)."""


ModelName = Annotated[str, _ModelRef()]
"""The type of a stage param that names one of the pipeline's `models:` (checked at load)."""


def model_params(params_cls: type[BaseModel]) -> list[str]:
    """Names of the params of a stage's `Params` that name a declared model."""
    return [
        name
        for name, f in params_cls.model_fields.items()
        if any(isinstance(m, _ModelRef) for m in f.metadata)
    ]


_POOL: dict[tuple, VLM] = {}
_POOL_GUARD = threading.Lock()
_LOAD_LOCKS: dict[tuple, threading.Lock] = {}
_FAMILIES: dict[tuple, Family] = {}


def release_models() -> None:
    """Forget every loaded model and family (tests; frees memory once no stage holds them)."""
    with _POOL_GUARD:
        _POOL.clear()
        _LOAD_LOCKS.clear()
        _FAMILIES.clear()


class DeclaredModel:
    """A model of a pipeline, by name: its spec, its family (no weights) and, on first use, the
    loaded model shared by every declaration with the same `load_key`."""

    def __init__(self, name: str, spec: ModelSpec):
        self.name, self.spec = name, spec

    @property
    def family(self) -> Family:
        """The model's family: visual tokens per image, limits, shapes. Reads the checkpoint's
        config and processor (no weights); for the openai backend, from `config` (or `id`)."""
        key = (self.spec.family_source, self.spec.limits())
        with _POOL_GUARD:
            loaded = _POOL.get(self.spec.load_key())
            if loaded is not None and loaded.family is not None:
                return loaded.family
            if key in _FAMILIES:
                return _FAMILIES[key]
        from .vlm.families import load_family

        try:
            family = load_family(key[0], key[1])
        except CascadeError as e:
            raise CascadeError(
                f"model '{self.name}' ({self.spec.id}): {e}"
                + (
                    "; for a served model, set `config` to the checkpoint's hub id or folder"
                    if "config" in type(self.spec).model_fields
                    else ""
                )
            ) from e
        with _POOL_GUARD:
            return _FAMILIES.setdefault(key, family)

    @property
    def pricing_family(self) -> Family:
        """The family routes are priced on: that of `priced_as` when set (its own config, or the
        reference config shipped for its hub id: `cascade.vlm.families.reference`), under this
        model's declared limits; else `family`."""
        source = self.spec.priced_as
        if source is None or source == self.spec.family_source:
            return self.family
        key = ("priced", source, self.spec.limits())
        with _POOL_GUARD:
            if key in _FAMILIES:
                return _FAMILIES[key]
        from .vlm.families.reference import pricing_family

        try:
            family = pricing_family(source, self.spec.limits())
        except CascadeError as e:
            raise CascadeError(f"model '{self.name}' priced_as: {e}") from e
        with _POOL_GUARD:
            return _FAMILIES.setdefault(key, family)

    @property
    def vlm(self) -> VLM:
        """The loaded model (loaded on first access, then shared)."""
        key = self.spec.load_key()
        with _POOL_GUARD:
            if key in _POOL:
                return _POOL[key]
            lock = _LOAD_LOCKS.setdefault(key, threading.Lock())
        with lock:  # concurrent first users wait for one load
            with _POOL_GUARD:
                if key in _POOL:
                    return _POOL[key]
            loaded = self.spec.load()
            with _POOL_GUARD:
                return _POOL.setdefault(key, loaded)

    def reduction(
        self,
        method: str | None = None,
        keep_ratio: float | None = None,
        fastv_layer: int | None = None,
    ) -> ReductionConfig:
        """The declared reduction defaults, each overridden when given (a stage that turns the
        reduction off keeps every token)."""
        from .vlm.reduction import ReductionConfig

        s = self.spec
        if keep_ratio is None:
            keep_ratio = 1.0 if method == "none" else s.keep_ratio
        return ReductionConfig(
            method or s.reduction, keep_ratio, fastv_layer=fastv_layer or s.fastv_layer
        )

    def __repr__(self) -> str:
        return f"DeclaredModel({self.name!r}, {self.spec.id!r}, backend={self.spec.backend!r})"


class Models(Mapping[str, DeclaredModel]):
    """The models a pipeline declares, by name."""

    def __init__(self, specs: Mapping[str, ModelSpec | dict[str, Any]] | None = None):
        self._models = {
            name: DeclaredModel(
                name, s if isinstance(s, ModelSpec) else ModelSpec.model_validate(s)
            )
            for name, s in (specs or {}).items()
        }

    def __getitem__(self, name: str) -> DeclaredModel:
        try:
            return self._models[name]
        except KeyError:
            declared = ", ".join(self._models) or "none"
            raise CascadeError(
                f"no model '{name}' is declared{did_you_mean(name, self._models)}; "
                f"declared models: {declared}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._models

    def __iter__(self) -> Iterator[str]:
        return iter(self._models)

    def __len__(self) -> int:
        return len(self._models)
