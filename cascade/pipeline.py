"""A loaded, validated pipeline: stage instances wired by checked edges, ready to run.

Validation happens here, at load time, without loading any model: stage types exist, params match
each stage's `Params`, every model a stage names is declared in `models:`, every port named
exists, every edge's types are compatible (both ends are named with their types), `when:` names a
router's declared branch, no cycles, and every stage reaches an output.

The pipeline owns its models (`Pipeline.models`, `cascade.models`): every stage gets them, and a
model loads on first use, shared with any other pipeline of the process that declares it the same.
Every stage also gets the pipeline's on-disk video index (`index:`, `cascade.index.VideoIndex`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import ConnectError, RegistryError, SpecError, did_you_mean
from .graph import Graph
from .index import VideoIndex
from .inputs import coerce_inputs
from .models import Models, model_params
from .registry import get_stage_class, stage_types
from .runner import PipelineResult, Plan, Step, execute, setup_stage
from .spec import PipelineSpec, SourceDoc, flatten_refs, load_spec, parse_ref
from .stage import Port, Router, Stage
from .trace import StageHook
from .types import INPUT_TYPES, is_assignable, strip_none, type_name

__all__ = ["Pipeline", "resolve_pipeline_path"]


def resolve_pipeline_path(name_or_path: str | Path) -> Path:
    """A path to a YAML file, or the name of a pipeline shipped in `cascade.pipelines`."""
    from . import pipelines as shipped  # noqa: F401  (the package-data folder)

    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    folder = Path(shipped.__file__).parent
    candidate = folder / f"{name_or_path}.yaml"
    if candidate.is_file():
        return candidate
    names = sorted(f.stem for f in folder.glob("*.yaml"))
    raise SpecError(
        f"no pipeline file or shipped pipeline named '{name_or_path}'"
        f"{did_you_mean(str(name_or_path), names)}; shipped: {', '.join(names)}"
    )


@dataclass
class Pipeline:
    """A validated pipeline. Build with `Pipeline.load(...)`; run with `.run(**inputs)`."""

    spec: PipelineSpec
    stages: dict[str, Stage]
    graph: Graph
    models: Models = field(default_factory=Models)
    file: str = "<memory>"
    hooks: list[StageHook] = field(default_factory=list)  # observers of every run's stages
    executor: Any = None  # a `cascade.runner.StageExecutor` running some stages elsewhere (Ray)
    models_checked: bool = field(default=False, repr=False)  # `check_models` passed

    # -- loading ------------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        source: str | Path,
        overrides: dict[str, Any] | None = None,
        *,
        type_params: dict[str, dict[str, Any]] | None = None,
        model_params: dict[str, Any] | None = None,
    ) -> Pipeline:
        """Load a YAML file or shipped pipeline name.

        overrides: dotted 'stage.param' or 'models.name.field' -> value. type_params: stage type
        (or "*": any type) -> params, set on every stage of that type that has them.
        model_params: fields set on every declared model (e.g. {"id": <folder>}). Precedence:
        the YAML, then model_params / type_params, then overrides."""
        path = resolve_pipeline_path(source)
        return cls._build(
            *load_spec(
                path,
                overrides,
                model_params=model_params,
                type_params=type_params,
                params_of=_params_of,
            )
        )

    @classmethod
    def from_yaml(
        cls,
        text: str,
        label: str = "<string>",
        overrides: dict[str, Any] | None = None,
        *,
        type_params: dict[str, dict[str, Any]] | None = None,
        model_params: dict[str, Any] | None = None,
    ) -> Pipeline:
        """A pipeline from YAML text (`label` names it in errors), checked as `load` checks."""
        return cls._build(
            *load_spec(
                label,
                overrides,
                text=text,
                model_params=model_params,
                type_params=type_params,
                params_of=_params_of,
            )
        )

    @classmethod
    def _build(cls, spec: PipelineSpec, doc: SourceDoc) -> Pipeline:
        for name, inp in spec.inputs.items():
            if inp.type not in INPUT_TYPES:
                raise doc.error(
                    ("inputs", name, "type"),
                    f"unknown input type '{inp.type}'"
                    f"{did_you_mean(inp.type, INPUT_TYPES)}; expected one of: "
                    f"{', '.join(INPUT_TYPES)}",
                )
        models, index = Models(spec.models), VideoIndex(spec.index)
        stages = {
            name: _instantiate(doc, name, st.type, st.params, models, index)
            for name, st in spec.stages.items()
        }
        for name, st in spec.stages.items():
            _check_inputs(doc, spec, stages, name)
            if st.when:
                _check_when(doc, stages, name, st.when)
        for out, ref in spec.outputs.items():
            for i, r in enumerate(flatten_refs([ref])):
                _resolve_ref(
                    doc, spec, stages, r, ("outputs", out) + ((i,) if isinstance(ref, list) else ())
                )
        graph = Graph.from_spec(spec)
        cycle = graph.find_cycle()
        if cycle:
            raise doc.error(("stages", cycle[0]), "cycle: " + " -> ".join(cycle))
        _check_reachable(doc, spec, graph)
        return cls(spec, stages, graph, models, doc.file)

    # -- running ------------------------------------------------------------------------------
    @functools.cached_property
    def plan(self) -> Plan:
        """What the runner executes: the stages wired as the YAML says (`cascade.runner.Plan`)."""
        steps = {
            name: Step(self.stages[name], st.inputs, st.when)
            for name, st in self.spec.stages.items()
        }
        return Plan(self.spec.name, steps, self.spec.outputs, self.graph)

    def run(self, **inputs: Any) -> PipelineResult:
        """Run the pipeline to completion; returns a `PipelineResult` (outputs + trace). Works
        from any thread, inside an event loop or not (`cascade.runner`)."""
        inputs = coerce_inputs(self.spec, inputs)  # the caller's mistakes first: they cost nothing
        self.check_models()
        return execute(self.plan, inputs, hooks=self.hooks, executor=self.executor)

    async def arun(self, **inputs: Any) -> PipelineResult:
        """`run` without blocking the running event loop (the run happens in a worker thread)."""
        return await asyncio.to_thread(self.run, **inputs)

    def setup(self) -> Pipeline:
        """Load every stage's models now instead of on first use."""
        self.check_models()
        for st in self.stages.values():
            if self.executor is None or not self.executor.handles(st):
                setup_stage(st)
        return self

    def check_models(self) -> None:
        """Before any model loads: every model the pipeline needs is here or downloadable, else
        one `cascade.preflight.ModelsUnavailable` naming each with the ways out, in seconds.
        Downloads what is missing (a progress bar per file). Once per pipeline; `run` and
        `setup` call it."""
        if self.models_checked:
            return
        from .preflight import ensure_models, pipeline_models

        ensure_models(pipeline_models(self))
        self.models_checked = True

    @property
    def name(self) -> str:
        return self.spec.name

    def to_mermaid(self) -> str:
        """The DAG as a Mermaid flowchart (`cascade graph --format mermaid`)."""
        return self.graph.to_mermaid()

    def to_dot(self) -> str:
        """The DAG in Graphviz DOT (`cascade graph --format dot`)."""
        return self.graph.to_dot()


def _params_of(type_: str) -> Iterable[str]:
    """The params a stage type takes (none for an unknown type: `_instantiate` reports it)."""
    cls = stage_types().get(type_)
    return cls.Params.model_fields if cls is not None else ()


def _instantiate(
    doc: SourceDoc, name: str, type_: str, params: dict[str, Any], models: Models, index: VideoIndex
) -> Stage:
    try:
        cls = get_stage_class(type_)
    except RegistryError as e:
        raise doc.error(("stages", name, "type"), str(e)) from None
    try:
        stage = cls(params, name=name, models=models, video_index=index)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "params"
        allowed = list(cls.Params.model_fields)
        if first["type"] == "extra_forbidden":
            msg = (
                f"stage type '{type_}' has no param '{field}'{did_you_mean(field, allowed)}; "
                f"params: {', '.join(allowed) or '(none)'}"
            )
        else:
            msg = f"{first['msg']} (got {first.get('input')!r})"
        raise doc.error(("stages", name, "params") + tuple(first["loc"]), msg) from None
    for param in model_params(cls.Params):
        ref = getattr(stage.params, param)
        if ref is not None and ref not in models:
            raise doc.error(
                ("stages", name, "params", param),
                f"stage '{name}' ({type_}) names model '{ref}', which the pipeline does "
                f"not declare{did_you_mean(ref, models)}; declared models: "
                f"{', '.join(models) or 'none (add a `models:` block)'}",
            )
    return stage


def _resolve_ref(
    doc: SourceDoc, spec: PipelineSpec, stages: dict[str, Stage], ref: str, path: tuple[Any, ...]
) -> tuple[str, Any]:
    """(description, type) of what `ref` points at; errors name the YAML path."""
    try:
        src, port = parse_ref(ref)
    except ValueError as e:
        raise doc.error(path, str(e)) from None
    if src is None:
        if port not in spec.inputs:
            raise doc.error(
                path,
                f"unknown pipeline input '${port}'"
                f"{did_you_mean(port, spec.inputs)}; inputs: "
                f"{', '.join('$' + i for i in spec.inputs) or '(none)'}",
            )
        return f"pipeline input '${port}'", INPUT_TYPES[spec.inputs[port].type]
    if src not in stages:
        raise doc.error(path, f"unknown stage '{src}' in '{ref}'{did_you_mean(src, stages)}")
    outs = stages[src].output_ports()
    if port not in outs:
        raise doc.error(
            path,
            f"stage '{src}' ({stages[src].type_name}) has no output '{port}'"
            f"{did_you_mean(port, outs)}; outputs: {_ports(outs)}",
            ConnectError,
        )
    return f"'{src}.{port}'", outs[port].type


def _check_inputs(doc: SourceDoc, spec: PipelineSpec, stages: dict[str, Stage], name: str) -> None:
    st, stage_obj = spec.stages[name], stages[name]
    ports = stage_obj.input_ports()
    for port, ref in st.inputs.items():
        if port not in ports:
            raise doc.error(
                ("stages", name, "inputs", port),
                f"stage type '{st.type}' has no input '{port}'"
                f"{did_you_mean(port, ports)}; inputs: {_ports(ports)}",
                ConnectError,
            )
        for i, r in enumerate(flatten_refs([ref])):
            path = ("stages", name, "inputs", port) + ((i,) if isinstance(ref, list) else ())
            what, src_type = _resolve_ref(doc, spec, stages, r, path)
            dst_type = ports[port].type
            # A None value is never delivered (the stage is skipped, a join falls through), so an
            # optional output may feed a required input.
            if not is_assignable(strip_none(src_type), dst_type):
                raise doc.error(
                    path,
                    f"type mismatch: {what} is {type_name(src_type)} but input "
                    f"'{name}.{port}' ({st.type}) expects {type_name(dst_type)}",
                    ConnectError,
                )
    missing = [p for p, port in ports.items() if port.required and p not in st.inputs]
    if missing:
        raise doc.error(
            ("stages", name, "inputs"),
            f"missing required input(s) {', '.join(missing)} of stage type "
            f"'{st.type}'; inputs: {_ports(ports)}",
            ConnectError,
        )


def _check_when(doc: SourceDoc, stages: dict[str, Stage], name: str, when: str) -> None:
    router, dot, branch = when.partition(".")
    path = ("stages", name, "when")
    if not dot or router not in stages:
        raise doc.error(
            path,
            f"'when: {when}' must be 'router.branch' naming a router stage"
            f"{did_you_mean(router, [n for n, s in stages.items() if isinstance(s, Router)])}",
        )
    r = stages[router]
    if not isinstance(r, Router):
        raise doc.error(path, f"stage '{router}' ({r.type_name}) is not a router; 'when' needs one")
    if branch not in r.branches:
        raise doc.error(
            path,
            f"router '{router}' ({r.type_name}) has no branch '{branch}'"
            f"{did_you_mean(branch, r.branches)}; branches: {', '.join(r.branches)}",
        )


def _check_reachable(doc: SourceDoc, spec: PipelineSpec, graph: Graph) -> None:
    """Every stage must feed an output (directly, through other stages, or as a router)."""
    needed: set[str] = set()
    frontier = [parse_ref(r)[0] for r in flatten_refs(spec.outputs.values())]
    while frontier:
        n = frontier.pop()
        if n is None or n in needed:
            continue
        needed.add(n)
        frontier.extend(graph.deps[n])
    for name in spec.stages:
        if name not in needed:
            raise doc.error(
                ("stages", name),
                f"stage '{name}' feeds no pipeline output; connect its outputs or remove it",
            )


def _ports(ports: dict[str, Port]) -> str:
    return ", ".join(f"{p.name}: {type_name(p.type)}" for p in ports.values()) or "(none)"
