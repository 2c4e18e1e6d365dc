"""What one entry of a pipeline's `models:` block may say, per backend, and the backend registry.

    models:
      vlm: {id: Qwen/Qwen2-VL-2B-Instruct, device: cuda, kv_cache_bytes: 4294967296}
      served: {id: Qwen/Qwen2-VL-7B-Instruct, backend: openai, base_url: http://gpu:8000/v1}

`ModelSpec` holds the fields every backend shares (the model, its image limits, the reduction
defaults); each backend registers its own subclass with its own fields (`register_backend`), and
an entry validates against the class its `backend:` names: a discriminated union built from the
registry, so a backend registered by a plugin is selectable from YAML with validated options.

Built-in: `transformers` (in process) and `openai` (any OpenAI-compatible server). This module
loads no model library: a pipeline validates its models without importing torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from .. import plugins
from ..decoding import DEFAULT_MAX_NUM_SEQS
from ..errors import InputError
from ..model_refs import ModelRef, hub_or_path
from .press import KVConfig
from .reduction import ReductionName

if TYPE_CHECKING:
    from .backend import VLM, Backend
    from .families import ImageLimits

__all__ = [
    "ModelSpec",
    "TransformersSpec",
    "ServeRoles",
    "OpenAISpec",
    "BackendEntry",
    "BACKENDS",
    "register_backend",
]

BACKENDS = plugins.backends
"""Backend name -> its `BackendEntry` (`cascade.plugins.backends`)."""


class ModelSpec(BaseModel):
    """One entry of a pipeline's `models:` block: the fields every backend shares. Validating a
    mapping (`ModelSpec.model_validate`, or a `models:` block) returns the subclass its `backend`
    names; construct a backend's class directly (`TransformersSpec(id=...)`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(
        description="hub id or local folder; for the openai backend, the served model name"
    )
    backend: str = Field("transformers", description="which registered VLM backend runs it")
    resolution: Literal["default", "full"] = Field(
        "default", description="image limits: the processor's, or full (native) resolution"
    )
    min_pixels: int | None = Field(None, gt=0, description="Qwen families: per-image pixel floor")
    max_pixels: int | None = Field(None, gt=0, description="Qwen families: per-image pixel cap")
    longest_edge: int | None = Field(None, gt=0, description="Idefics3/SmolVLM: resize edge")
    reduction: ReductionName = Field("none", description="default visual token reduction")
    keep_ratio: float = Field(
        1.0, gt=0.0, le=1.0, description="default fraction of visual tokens kept"
    )
    fastv_layer: int = Field(2, ge=1, description="FastV: drop tokens after this decoder layer")
    priced_as: str | None = Field(
        None,
        description="hub id or folder of the checkpoint whose real shapes price this model's "
        "routes (`path_route`): set when `id` is a stand-in (the offline random-weight model "
        "runs in the declared one's place); null: the model itself",
    )

    def __init__(self, **data: Any):
        if type(self) is ModelSpec:
            raise TypeError(
                "ModelSpec is the base of every backend's options: validate a mapping "
                "(ModelSpec.model_validate) or construct the backend's own class"
            )
        super().__init__(**data)

    def model_refs(self) -> list[ModelRef]:
        """What loading this entry reads, for the check before any model loads
        (`cascade.preflight`). None by default: a backend whose model is neither a local path nor
        a hub repo (a replay file, a remote service) declares nothing, and checks its own options
        when it loads."""
        return []

    @model_validator(mode="wrap")
    @classmethod
    def _by_backend(cls, value: Any, handler: Any) -> Any:
        """The discriminated union: a mapping validates against the class `backend` names."""
        if cls is ModelSpec and isinstance(value, Mapping):
            return cls.options_class(value).model_validate(value)
        return handler(value)

    @classmethod
    def options_class(cls, value: Mapping[str, Any]) -> type[ModelSpec]:
        """The ModelSpec subclass of the backend a raw entry names (default: transformers)."""
        name = value.get("backend", "transformers")
        if not isinstance(name, str) or name not in BACKENDS:
            # Validated as a choice among the registered names, so the error has its YAML path.
            names: Any = Literal[tuple(BACKENDS.names())]  # a type built at run time
            choice = create_model("Backend", backend=(names, ...))
            choice.model_validate({"backend": name})
        return BACKENDS[name].options

    @classmethod
    def shared_fields(cls) -> set[str]:
        """The fields every backend has."""
        return set(ModelSpec.model_fields)

    # -- what the runtime needs ---------------------------------------------------------------
    def load_key(self) -> tuple:
        """What makes two declarations the same loaded model (the reduction defaults and the
        pricing do not)."""
        fields = self.model_dump(exclude={"reduction", "keep_ratio", "fastv_layer", "priced_as"})
        # a nested block (`kv`) as sorted pairs too, so the key stays hashable
        return tuple(
            sorted(
                (k, tuple(sorted(v.items())) if isinstance(v, dict) else v)
                for k, v in fields.items()
            )
        )

    @property
    def family_source(self) -> str:
        """Hub id or folder whose config and processor give the model's family."""
        return self.id

    def limits(self) -> ImageLimits:
        """The image limits the model is declared with (`cascade.vlm.families.ImageLimits`)."""
        from .families import ImageLimits

        return ImageLimits(self.resolution, self.min_pixels, self.max_pixels, self.longest_edge)

    def loader_options(self) -> dict[str, Any]:
        """Keyword arguments for the backend's loader: its own fields (the shared ones go to
        `VLM.load` by name)."""
        return self.model_dump(exclude=self.shared_fields())

    def load(self) -> VLM:
        """Load the model (no sharing: `cascade.models.DeclaredModel.vlm` shares)."""
        from .backend import VLM

        return VLM.load(
            self.id,
            backend=self.backend,
            resolution=self.resolution,
            min_pixels=self.min_pixels,
            max_pixels=self.max_pixels,
            longest_edge=self.longest_edge,
            **self.loader_options(),
        )


@dataclass(frozen=True)
class BackendEntry:
    """A registered backend: `loader(model, *, device, dtype, limits, **options)` returns an object
    satisfying `cascade.vlm.backend.Backend`; `options` validates its `models:` entries."""

    name: str
    loader: Callable[..., Backend]
    options: type[ModelSpec]


def register_backend(
    name: str, loader: Callable[..., Backend], options: type[ModelSpec] | None = None
) -> None:
    """Add a backend under `name`. options: its `ModelSpec` subclass (fields of its own, and
    `backend: Literal[name]`); default: the shared fields only. `VLM.load(model, backend=name)`
    and a `models:` entry with `backend: name` then reach it."""
    if options is None:
        this: Any = Literal[name]  # a type built at run time
        options = create_model(f"{name.title()}Spec", __base__=ModelSpec, backend=(this, name))
    elif not (isinstance(options, type) and issubclass(options, ModelSpec)):
        raise TypeError(f"register_backend('{name}'): options must be a ModelSpec subclass")
    BACKENDS.register(name, BackendEntry(name, loader, options))


# -- the built-in backends ----------------------------------------------------------------------
class ServeRoles(BaseModel):
    """How `cascade serve --ray` / `cascade deploy` run one model (`models.<name>.serve`).

    disaggregate: "none" (one deployment encodes, prefills and decodes), "pd" (prefill apart:
    a prefill deployment computes the images' prefix and ships its KV blocks to the decode
    replica, the model's stage deployment, which prefills the question and decodes) or "epd"
    (the vision tower apart too). In process it changes nothing: every role runs in one place.
    encode_replicas / prefill_replicas: those deployments' replicas. decode_replicas: the VLM
    stage deployment's (None: `--replicas`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    disaggregate: Literal["none", "pd", "epd"] = "none"
    encode_replicas: int = Field(1, ge=1)
    prefill_replicas: int = Field(1, ge=1)
    decode_replicas: int | None = Field(None, ge=1)

    @property
    def roles(self) -> tuple[str, ...]:
        """The deployments besides the decode side's: ("encode", "prefill"), ("prefill",) or ()."""
        return {"none": (), "pd": ("prefill",), "epd": ("encode", "prefill")}[self.disaggregate]


class TransformersSpec(ModelSpec):
    """A model run in process by transformers, chunk by chunk
    (`cascade.vlm.transformers_backend`)."""

    backend: Literal["transformers"] = "transformers"
    device: str = Field("auto", description="auto | cpu | cuda | cuda:N")
    dtype: str = Field("auto", description="auto | float32 | bfloat16 | float16")
    kernels: Literal["auto", "triton", "torch"] = Field(
        "auto", description="fused Triton ops ('auto': on CUDA) or their torch references"
    )
    attn_implementation: str | None = None
    context_window: int | None = Field(None, gt=0, description="prompt + generated token cap")
    kv_cache_bytes: int = Field(2 << 30, ge=0, description="KV prefix cache budget (0: off)")
    kv_int8: bool = Field(False, description="store cached KV as int8")
    kv: KVConfig = Field(
        default_factory=KVConfig,
        description="KV press and storage dtype, e.g. {dtype: int4, press: snapkv, keep: 0.2} "
        "(docs/kv.md)",
    )
    kv_position_independent: bool = Field(
        False,
        description="also reuse an image's cached KV where it moved in the prompt "
        "(approximate; MPIC/CacheBlend-style)",
    )
    kv_recompute_image_tokens: int = Field(
        16,
        ge=0,
        description="position-independent KV: leading visual tokens of a moved image recomputed",
    )
    encoder_cache_bytes: int = Field(
        256 << 20,
        ge=0,
        description="encoder-output cache budget: the tower runs once per image (0: off)",
    )
    max_num_seqs: int = Field(
        DEFAULT_MAX_NUM_SEQS,
        ge=1,
        description="continuous batching: the most completions one decode step runs",
    )
    serve: ServeRoles = Field(
        default_factory=ServeRoles,
        description="on Ray: encode / prefill / decode apart, e.g. {disaggregate: pd, "
        "prefill_replicas: 2} (docs/serving.md)",
    )

    @model_validator(mode="after")
    def _position_independent_needs_the_kv_cache(self) -> TransformersSpec:
        if self.kv_position_independent and self.kv_cache_bytes == 0:
            raise ValueError(
                "kv_position_independent reuses KV kept in the KV prefix cache: "
                "set kv_cache_bytes > 0"
            )
        if self.kv_position_independent and not self.kv.is_identity:
            raise ValueError(
                "kv.press and kv_position_independent do not combine (a moved image's KV is "
                "reused unpressed): set one of them"
            )
        if self.kv_int8 and self.kv.dtype == "int4":
            raise ValueError("kv_int8: true contradicts kv.dtype: int4; set one of them")
        if self.serve.disaggregate != "none" and self.kv_cache_bytes == 0:
            raise ValueError(
                f"serve.disaggregate: {self.serve.disaggregate} ships KV blocks through the KV "
                "prefix cache: set kv_cache_bytes > 0"
            )
        if self.serve.disaggregate != "none" and self.kv_position_independent:
            raise ValueError(
                "serve.disaggregate ships the blocks a cold run computes; "
                "kv_position_independent moves them: set one of them"
            )
        return self

    def loader_options(self) -> dict[str, Any]:
        """The loader's options: not `serve`, which only the Ray layout reads."""
        return self.model_dump(exclude=self.shared_fields() | {"serve"})

    def model_refs(self) -> list[ModelRef]:
        """The checkpoint (config, processor, weights); random weights may stand in
        (`--offline`)."""
        return [hub_or_path("VLM", self.id, "transformers", "id", stand_in=True)]


class OpenAISpec(ModelSpec):
    """A model served by an OpenAI-compatible server (vLLM, SGLang, ...): `id` is the served
    name."""

    backend: Literal["openai"] = "openai"
    base_url: str | None = Field(None, description="the server's /v1 URL")
    config: str | None = Field(
        None,
        description="hub id or folder of the served checkpoint, for its family (visual "
        "tokens, FLOPs); default: `id`",
    )
    timeout: float = Field(300.0, gt=0, description="seconds per request")
    max_retries: int = Field(2, ge=0, description="retries with backoff")

    @property
    def family_source(self) -> str:
        return self.config or self.id

    def model_refs(self) -> list[ModelRef]:
        """Only the served checkpoint's config and processor, read to price images."""
        return [
            hub_or_path(
                "VLM config",
                self.family_source,
                "transformers_config",
                "config" if self.config else "id",
                stand_in=True,
            )
        ]

    def loader_options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {
            "timeout": self.timeout,
            "max_retries": self.max_retries,
            # "" tries the model name as a checkpoint (a hub id, as vLLM names
            # models) and goes without a family when it is not one
            "config": self.config if self.config is not None else "",
        }
        if self.base_url:
            opts["base_url"] = self.base_url
        return opts


def _load_transformers(model: str, **opts: Any) -> Backend:
    from .transformers_backend import TransformersBackend

    return TransformersBackend.load(model, **opts)


def _load_openai(model: str, **opts: Any) -> Backend:
    from .openai_backend import OpenAIBackend

    opts.pop("device", None), opts.pop("dtype", None)  # the server decides those
    if "kernels" in opts:
        raise InputError(
            "`kernels` picks the in-process Triton/torch ops of the transformers "
            "backend; an openai-compatible server runs its own kernels"
        )
    return OpenAIBackend(model, **opts)


register_backend("transformers", _load_transformers, TransformersSpec)
register_backend("openai", _load_openai, OpenAISpec)
