"""The stage protocol: what every node of a pipeline is.

A stage is a class registered under a short name with `@stage("name")`. Its `Params` is a pydantic
model that forbids unknown fields; `__init__` only validates params (so loading a pipeline never
loads a model); `setup()` does the heavy loading once; `run(**inputs)` returns a frozen dataclass.
Port names and types are read from `run`'s signature and return annotation, so both ends of every
edge are checked when a pipeline loads, before anything runs.

    @stage("thumbnail")
    class Thumbnail(Stage):
        class Params(StageParams):
            size: int = Field(448, gt=0, description="longest side in pixels")

        @dataclass(frozen=True)
        class Outputs:
            image: Image

        def run(self, image: Image) -> Outputs:
            ...

A router is a stage with `branches`: its outputs hold a `route: Route`, and the runner skips the
stages that wait on the branches it did not take.

How a stage is served is declared on its class (`serving = Serving(...)`, read by the Ray layer
through the registry): heavy (its own Ray Serve deployment, with its resources) or light (it runs
in the ingress); batchable (`run_batch` answers several calls at once); an affinity input (calls
about the same content go to the replica that answered before, where its caches are). The
defaults describe a light stage; nothing changes for a stage run in process.

A stage that uses a model of the pipeline's `models:` block names it with a `ModelName` param
(`model: ModelName = "vlm"`) and reaches it with `self.model(self.params.model)`
(`cascade.models.DeclaredModel`: its family, and the loaded model, shared). A stage that saves or
reads a video's on-disk index asks `self.video_index` (`cascade.index.VideoIndex`, the pipeline's
`index:` setting) for its store.

A run may give some stages other params for that run only (`run_params`: the server maps a
request's `mm_processor_kwargs` onto them): `self.params` reads them from a context variable,
which the runner's stage threads inherit, so two runs of one pipeline object, one after the other
or side by side, each see their own and nothing stays on the stage.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import inspect
import threading
import typing
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, cast

from pydantic import BaseModel, ConfigDict

from . import plugins
from .artifacts import Route
from .index import IndexSpec, VideoIndex
from .models import DeclaredModel, Models, ModelSpec

if TYPE_CHECKING:
    from .model_refs import ModelRef

__all__ = [
    "Stage",
    "Router",
    "StageParams",
    "Port",
    "Serving",
    "stage",
    "run_params",
    "run_params_of",
]

# id(stage) -> the params it runs with in this run (see `run_params`); empty outside one.
_RUN_PARAMS: contextvars.ContextVar[Mapping[int, StageParams]] = contextvars.ContextVar(
    "cascade_run_params", default=MappingProxyType({})
)


@contextmanager
def run_params(params: Mapping[Stage, StageParams]) -> Iterator[None]:
    """Runs started inside the block (in this context) see `params[stage]` as that stage's
    `params`; every other stage, and every run outside the block, its own."""
    token = _RUN_PARAMS.set({**_RUN_PARAMS.get(), **{id(st): p for st, p in params.items()}})
    try:
        yield
    finally:
        _RUN_PARAMS.reset(token)


def run_params_of(stage: Stage) -> StageParams | None:
    """The params `run_params` gives `stage` in this context; None when it runs with its own
    (a stage run elsewhere, a Ray replica, is sent them with the call)."""
    return _RUN_PARAMS.get().get(id(stage))


class StageParams(BaseModel):
    """Base of every stage's `Params`: unknown fields are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


@dataclass(frozen=True)
class Port:
    """One named, typed input or output of a stage."""

    name: str
    type: Any
    required: bool = True
    default: Any = None


@dataclass(frozen=True)
class Serving:
    """How a stage type is served on Ray Serve (in process every stage runs alike).

    heavy: runs in a deployment of its own (one per stage type, named after it) whose replicas
    load its models; a light stage runs in the ingress. num_cpus / num_gpus: Ray resources per
    replica (defaults; a deployment's options override them). pool: which replica-count and
    resource flags apply: "model" (`--replicas`, `--vlm-gpus`: the stages that generate) or
    "stage" (`--stage-replicas`). batch: concurrent calls of one replica may be answered
    together by `run_batch` (each call `batchable`). affinity: the input port whose content
    routes a call to the replica that answered about it before (its caches hold that content),
    or None."""

    heavy: bool = False
    num_cpus: float = 0.5
    num_gpus: float = 0.0
    pool: typing.Literal["model", "stage"] = "stage"
    batch: bool = False
    affinity: str | None = None


class Stage:
    """Base class of all stages. Subclass, define `Params`, `Outputs` and `run`, then
    `@stage(...)`."""

    type_name: ClassVar[str] = ""
    Params: ClassVar[type[StageParams]] = StageParams
    serving: ClassVar[Serving] = Serving()

    def __init__(
        self,
        params: StageParams | dict[str, Any] | None = None,
        *,
        name: str = "",
        models: Models | Mapping[str, ModelSpec | dict[str, Any]] | None = None,
        video_index: VideoIndex | IndexSpec | bool | None = None,
    ):
        self.name = name or self.type_name
        if isinstance(params, self.Params):
            self._params = params
        else:  # a dict of fields (another stage type's params fail here: not a mapping)
            self._params = self.Params(**cast("dict[str, Any]", params or {}))
        self.models = models if isinstance(models, Models) else Models(models)
        self.video_index = VideoIndex.of(video_index)
        self._setup_lock = threading.Lock()
        self._is_setup = False

    @property
    def params(self) -> StageParams:
        """The stage's params: its own, or this run's (`run_params`)."""
        return _RUN_PARAMS.get().get(id(self), self._params)

    @property
    def own_params(self) -> StageParams:
        """The stage's own params (its configuration), whatever this run gives it."""
        return self._params

    def model(self, name: str) -> DeclaredModel:
        """A model the pipeline declares (`models:`), by name. A stage used on its own gets its
        models at construction: `Stage(params, models={"vlm": {"id": ...}})`, and its index the
        same way: `Stage(params, video_index=True)` (what a pipeline's `index: true` gives)."""
        return self.models[name]

    def setup(self) -> None:
        """Load weights and other heavy resources. Called once, before the first `run`."""

    def model_refs(self) -> list[ModelRef]:
        """The models `setup()` loads, as `cascade.model_refs.ModelRef`s (hub ids, local files,
        URLs), so a pipeline can check they are here or can be downloaded before loading any
        (`cascade.preflight`). Reads params only: no loading, no network. Default: none."""
        return []

    def ensure_setup(self) -> None:
        """Run `setup()` once, thread-safely, before the first run."""
        with self._setup_lock:
            if not self._is_setup:
                self.setup()
                self._is_setup = True

    # Every stage overrides it with its own ports as parameters; `*args: Any, **inputs: Any` is
    # the signature type checkers accept any override of. The runner passes keywords only.
    def run(self, *args: Any, **inputs: Any) -> Any:  # pragma: no cover
        """The stage's work: typed keyword inputs (the input ports) to its `Outputs` dataclass."""
        raise NotImplementedError

    def streams(self) -> bool:
        """Whether a run streams tokens to the run's caller (`cascade.streaming.claim_stream`);
        a remote caller then reads them as they come instead of batching the call."""
        return False

    def batchable(self, inputs: Mapping[str, Any]) -> bool:
        """Whether this call may share a `run_batch` (`serving.batch`); False sends it to `run`."""
        return self.serving.batch

    def run_batch(self, calls: Sequence[Mapping[str, Any]]) -> Iterator[Any]:
        """Several calls' `run` at once (`serving.batch`): yields each call's outputs, in order.
        What the stage records (`cascade.trace.record`) before yielding a call's outputs counts
        to that call: the caller switches the trace scope between items."""
        raise NotImplementedError(f"stage '{self.type_name}' declares no run_batch")

    def __call__(self, **inputs: Any) -> Any:
        """Run the stage directly from Python (sets it up on first use)."""
        self.ensure_setup()
        return self.run(**inputs)

    # -- ports, read from the signature --------------------------------------------------------
    @classmethod
    @functools.cache
    def _hints(cls) -> dict[str, Any]:
        localns: dict[str, Any] = {}
        for klass in reversed(cls.__mro__):
            localns.update(vars(klass))
        return typing.get_type_hints(cls.run, localns=localns)

    @classmethod
    @functools.cache
    def input_ports(cls) -> dict[str, Port]:
        """The input ports: `run()`'s annotated parameters (one with a default is optional)."""
        hints = cls._hints()
        ports = {}
        for pname, p in inspect.signature(cls.run).parameters.items():
            if pname == "self" or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            if pname not in hints:
                raise TypeError(
                    f"stage '{cls.type_name}': run() input '{pname}' has no type annotation"
                )
            required = p.default is inspect.Parameter.empty
            ports[pname] = Port(pname, hints[pname], required, None if required else p.default)
        return ports

    @classmethod
    @functools.cache
    def output_ports(cls) -> dict[str, Port]:
        """The output ports: the fields of the dataclass `run()` is annotated to return."""
        out = cls._hints().get("return")
        if out is None or not dataclasses.is_dataclass(out):
            raise TypeError(
                f"stage '{cls.type_name}': run() must be annotated to return a dataclass"
            )
        return {
            f.name: Port(f.name, t)
            for f, t in zip(
                dataclasses.fields(out), typing.get_type_hints(out).values(), strict=False
            )
        }

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """Type name, doc, ports with types, params with defaults and, for a heavy stage, its
        serving traits: what `cascade stages` prints."""
        from .types import type_name

        params = {}
        for fname, f in cls.Params.model_fields.items():
            default = None if f.is_required() else f.get_default(call_default_factory=True)
            args = (f.annotation, *f.metadata)  # (Annotated[(...)] with a star is 3.11 syntax)
            annotation = Annotated[args] if f.metadata else f.annotation
            params[fname] = {
                "type": type_name(annotation),
                "default": default,
                "required": f.is_required(),
                "description": f.description or "",
            }
        doc = inspect.getdoc(cls) or ""
        desc = {
            "type": cls.type_name,
            "description": doc.split("\n\n")[0].replace("\n", " "),
            "inputs": {
                p.name: {"type": type_name(p.type), "required": p.required}
                for p in cls.input_ports().values()
            },
            "outputs": {p.name: {"type": type_name(p.type)} for p in cls.output_ports().values()},
            "params": params,
        }
        if issubclass(cls, Router):
            desc["branches"] = list(cls.branches)
        if cls.serving.heavy:
            desc["serving"] = dataclasses.asdict(cls.serving)
        return desc


class Router(Stage):
    """A stage whose outputs include `route: Route`; the runner follows only `route.branch`."""

    branches: ClassVar[tuple[str, ...]] = ()

    @classmethod  # the base's is wrapped in functools.cache: same call, another static type
    def output_ports(cls) -> dict[str, Port]:  # type: ignore[override]
        """The output ports, which must include `route: Route`."""
        ports = super().output_ports()
        if "route" not in ports or ports["route"].type is not Route:
            raise TypeError(f"router '{cls.type_name}' must output 'route: Route'")
        return ports


def stage(type_name: str):
    """Class decorator: register a Stage subclass under `type_name` (a duplicate is an error)."""

    def wrap(cls: type[Stage]) -> type[Stage]:
        if not (isinstance(cls, type) and issubclass(cls, Stage)):
            raise TypeError(f"@stage('{type_name}') must decorate a Stage subclass, got {cls!r}")
        cls.type_name = type_name
        inputs = cls.input_ports()  # fail at import, not at first pipeline load
        cls.output_ports()
        serving = cls.serving
        if serving.affinity is not None and serving.affinity not in inputs:
            raise TypeError(
                f"stage '{type_name}': serving.affinity '{serving.affinity}' is not "
                f"an input of run() (inputs: {', '.join(inputs) or 'none'})"
            )
        if serving.batch and cls.run_batch is Stage.run_batch:
            raise TypeError(f"stage '{type_name}': serving.batch needs a run_batch method")
        plugins.stages.register(type_name, cls)
        return cls

    return wrap
