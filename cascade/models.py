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

A stage names the model it uses with a `ModelName` param (`model: vlm`); loading a pipeline checks
every name (did-you-mean) without loading anything. The family comes from the checkpoint's config
(`model_type`). The pipeline hands every stage its `Models`; `stage.model("vlm")` is a
`DeclaredModel`: its `family` (config and processor, no weights: visual tokens per image, shapes,
limits) for stages that only price images (token budgets, baselines), and its loaded `vlm` for
stages that run it. Loading is shared: one instance per declaration per process, so two stages,
two pipelines or two questions never load the same model twice; calls go through its `lock`.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .errors import CascadeError, did_you_mean

if TYPE_CHECKING:
    from .vlm import VLM, ReductionConfig
    from .vlm.families import Family, ImageLimits

__all__ = ["ModelSpec", "ModelName", "Models", "DeclaredModel", "model_params", "release_models"]


class _ModelRef:
    """Marks a stage param whose value names a declared model (see `ModelName`)."""


ModelName = Annotated[str, _ModelRef()]
"""The type of a stage param that names one of the pipeline's `models:` (checked at load)."""


def model_params(params_cls: type[BaseModel]) -> list[str]:
    """Names of the params of a stage's `Params` that name a declared model."""
    return [name for name, f in params_cls.model_fields.items()
            if any(isinstance(m, _ModelRef) for m in f.metadata)]


Reduction = Literal["none", "pool", "divprune", "visionzip", "dart", "fastv", "tower"]


class ModelSpec(BaseModel):
    """One entry of a pipeline's `models:` block: a VLM, where it runs, and its defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="hub id or local folder; for the openai backend, the served model name")
    backend: Literal["transformers", "openai"] = "transformers"
    base_url: str | None = Field(None, description="openai backend: the server's /v1 URL")
    config: str | None = Field(
        None, description="openai backend: hub id or folder of the served checkpoint, for its "
        "family (visual tokens, FLOPs); default: `id`")
    timeout: float = Field(300.0, gt=0, description="openai backend: seconds per request")
    max_retries: int = Field(2, ge=0, description="openai backend: retries with backoff")
    device: str = Field("auto", description="auto | cpu | cuda | cuda:N")
    dtype: str = Field("auto", description="auto | float32 | bfloat16 | float16")
    kernels: Literal["auto", "triton", "torch"] = Field(
        "auto", description="fused Triton ops ('auto': on CUDA) or their torch references")
    attn_implementation: str | None = None
    context_window: int | None = Field(None, gt=0, description="prompt + generated token cap")
    kv_cache_bytes: int = Field(2 << 30, ge=0, description="KV prefix cache budget (0: off)")
    kv_int8: bool = Field(False, description="store cached KV as int8")
    resolution: Literal["default", "full"] = Field(
        "default", description="image limits: the processor's, or full (native) resolution")
    min_pixels: int | None = Field(None, gt=0, description="Qwen families: per-image pixel floor")
    max_pixels: int | None = Field(None, gt=0, description="Qwen families: per-image pixel cap")
    longest_edge: int | None = Field(None, gt=0, description="Idefics3/SmolVLM: resize edge")
    reduction: Reduction = Field("none", description="default visual token reduction")
    keep_ratio: float = Field(1.0, gt=0.0, le=1.0, description="default fraction of visual tokens kept")
    fastv_layer: int = Field(2, ge=1, description="FastV: drop tokens after this decoder layer")

    @model_validator(mode="after")
    def _backend_fields(self) -> "ModelSpec":
        if self.backend == "transformers" and (self.base_url or self.config):
            raise ValueError("base_url and config are for backend: openai")
        return self

    def load_key(self) -> tuple:
        """What makes two declarations the same loaded model (the reduction defaults do not)."""
        return tuple(sorted(self.model_dump(exclude={"reduction", "keep_ratio", "fastv_layer"}).items()))

    def limits(self) -> "ImageLimits":
        """The image limits the model is declared with (`cascade.vlm.families.ImageLimits`)."""
        from .vlm.families import ImageLimits

        return ImageLimits(self.resolution, self.min_pixels, self.max_pixels, self.longest_edge)

    def load(self) -> "VLM":
        """Load the model (no sharing: `DeclaredModel.vlm` shares)."""
        from .vlm import VLM

        opts: dict[str, Any] = {}
        if self.backend == "openai":
            opts = {"timeout": self.timeout, "max_retries": self.max_retries,
                    "config": self.config if self.config is not None else ""}
            if self.base_url:
                opts["base_url"] = self.base_url
        else:
            opts = {"kv_cache_bytes": self.kv_cache_bytes, "kv_int8": self.kv_int8,
                    "attn_implementation": self.attn_implementation,
                    "context_window": self.context_window, "kernels": self.kernels}
        return VLM.load(self.id, backend=self.backend, device=self.device, dtype=self.dtype,
                        resolution=self.resolution, min_pixels=self.min_pixels,
                        max_pixels=self.max_pixels, longest_edge=self.longest_edge, **opts)


class _Loaded:
    """A loaded model and the lock its calls go through."""

    def __init__(self, vlm: "VLM"):
        self.vlm, self.lock = vlm, threading.Lock()


_POOL: dict[tuple, _Loaded] = {}
_POOL_GUARD = threading.Lock()
_LOAD_LOCKS: dict[tuple, threading.Lock] = {}
_FAMILIES: dict[tuple, "Family"] = {}


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
    def family(self) -> "Family":
        """The model's family: visual tokens per image, limits, shapes. Reads the checkpoint's
        config and processor (no weights); for the openai backend, from `config` (or `id`)."""
        key = (self.spec.config or self.spec.id, self.spec.limits())
        with _POOL_GUARD:
            loaded = _POOL.get(self.spec.load_key())
            if loaded is not None and loaded.vlm.family is not None:
                return loaded.vlm.family
            if key in _FAMILIES:
                return _FAMILIES[key]
        from .vlm.families import load_family

        try:
            family = load_family(key[0], key[1])
        except CascadeError as e:
            raise CascadeError(f"model '{self.name}' ({self.spec.id}): {e}"
                               + ("; for a served model, set `config` to the checkpoint's hub id "
                                  "or folder" if self.spec.backend == "openai" else "")) from e
        with _POOL_GUARD:
            return _FAMILIES.setdefault(key, family)

    def _loaded(self) -> _Loaded:
        key = self.spec.load_key()
        with _POOL_GUARD:
            if key in _POOL:
                return _POOL[key]
            lock = _LOAD_LOCKS.setdefault(key, threading.Lock())
        with lock:  # concurrent first users wait for one load
            with _POOL_GUARD:
                if key in _POOL:
                    return _POOL[key]
            loaded = _Loaded(self.spec.load())
            with _POOL_GUARD:
                return _POOL.setdefault(key, loaded)

    @property
    def vlm(self) -> "VLM":
        """The loaded model (loaded on first access, then shared)."""
        return self._loaded().vlm

    @property
    def lock(self) -> threading.Lock:
        """Serializes calls: one loaded model is not thread-safe."""
        return self._loaded().lock

    def reduction(self, method: str | None = None, keep_ratio: float | None = None,
                  fastv_layer: int | None = None) -> "ReductionConfig":
        """The declared reduction defaults, each overridden when given (a stage that turns the
        reduction off keeps every token)."""
        from .vlm import ReductionConfig

        s = self.spec
        if keep_ratio is None:
            keep_ratio = 1.0 if method == "none" else s.keep_ratio
        return ReductionConfig(method or s.reduction, keep_ratio, fastv_layer=fastv_layer or s.fastv_layer)

    def __repr__(self) -> str:
        return f"DeclaredModel({self.name!r}, {self.spec.id!r}, backend={self.spec.backend!r})"


class Models(Mapping[str, DeclaredModel]):
    """The models a pipeline declares, by name."""

    def __init__(self, specs: Mapping[str, ModelSpec | dict[str, Any]] | None = None):
        self._models = {name: DeclaredModel(name, s if isinstance(s, ModelSpec) else ModelSpec(**s))
                        for name, s in (specs or {}).items()}

    def __getitem__(self, name: str) -> DeclaredModel:
        try:
            return self._models[name]
        except KeyError:
            declared = ", ".join(self._models) or "none"
            raise CascadeError(f"no model '{name}' is declared{did_you_mean(name, self._models)}; "
                               f"declared models: {declared}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._models

    def __iter__(self) -> Iterator[str]:
        return iter(self._models)

    def __len__(self) -> int:
        return len(self._models)
