"""Pipeline YAML -> a validated `PipelineSpec`, with errors that name the file, line and YAML path.

Only `yaml.safe_load`-level constructs are accepted (a SafeLoader that also rejects duplicate keys).
This module checks the *shape* of the document (the `models:` block included: each entry against
its backend's options, `cascade.vlm.options`; the `index:` block, `cascade.index`);
`cascade.pipeline` checks it against the registered stage types (params, ports, edge types,
branches, model names) and `cascade.graph` checks cycles.

Edits applied to the raw document before validation, in this order: `model_params` (fields set on
every declared model), `type_params` (params for every stage of a type; type "*": every stage that
has the param, the type's own entry winning), then dotted `overrides` (`stage.param`,
`models.name.field`, `index` or `index.field`), so the more specific wins.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import SpecError, did_you_mean
from .index import IndexSpec
from .vlm.options import BACKENDS, ModelSpec

__all__ = [
    "PipelineSpec",
    "StageSpec",
    "InputSpec",
    "SourceDoc",
    "load_spec",
    "parse_ref",
    "flatten_refs",
]

Ref = str | list[str]


class InputSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: str
    default: Any = None
    required: bool = True
    description: str = ""


class StageSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: str
    params: dict[str, Any] = Field(default_factory=dict)
    inputs: dict[str, Ref] = Field(default_factory=dict)
    when: str | None = None
    description: str = ""


class PipelineSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    index: IndexSpec | None = Field(
        None,
        description="keep each video's index on disk (`true`, "
        "or `{folder: ...}`); absent or false: keep none",
    )
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    stages: dict[str, StageSpec]
    outputs: dict[str, Ref]

    @field_validator("models", mode="before")
    @classmethod
    def _shorthand_models(cls, value: Any) -> Any:
        # `vlm: Qwen/Qwen2-VL-2B-Instruct` is shorthand for `vlm: {id: Qwen/Qwen2-VL-2B-Instruct}`.
        if not isinstance(value, dict):
            return value
        return {k: {"id": v} if isinstance(v, str) else v for k, v in value.items()}

    @field_validator("index", mode="before")
    @classmethod
    def _index_switch(cls, value: Any) -> Any:
        # `index: true` is `index: {}` (next to each video); `index: false` is no index.
        return {} if value is True else None if value is False else value

    @field_validator("stages")
    @classmethod
    def _reserved_names(cls, value: dict[str, StageSpec]) -> dict[str, StageSpec]:
        for block in ("models", "index"):  # `models.x.y` / `index.x` overrides address the blocks
            if block in value:
                raise ValueError(
                    f"'{block}' is reserved (it names the {block} block); rename the stage"
                )
        return value

    @field_validator("inputs", mode="before")
    @classmethod
    def _shorthand_inputs(cls, value: Any) -> Any:
        # `question: str` is shorthand for `question: {type: str}`; a default makes it optional.
        if not isinstance(value, dict):
            return value
        out = {}
        for k, v in value.items():
            v = {"type": v} if isinstance(v, str) else v
            if isinstance(v, dict) and "default" in v:
                v = {**v, "required": False}
            out[k] = v
        return out


def parse_ref(ref: str) -> tuple[str | None, str]:
    """`$question` -> (None, 'question'); `thumb.image` -> ('thumb', 'image')."""
    if ref.startswith("$"):
        return None, ref[1:]
    stage_name, dot, port = ref.partition(".")
    if not dot or not stage_name or not port:
        raise ValueError(f"reference '{ref}' must be '$input_name' or 'stage.port'")
    return stage_name, port


def flatten_refs(values: Iterable[str | list[str]]) -> list[str]:
    """Every reference in `values`, a list (a join: "first that ran") counting as its members."""
    out: list[str] = []
    for v in values:
        out.extend(v if isinstance(v, list) else [v])
    return out


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (plain YAML keeps the last one silently)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key '{key}' (first defined on line {seen[key] + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


class SourceDoc:
    """A YAML document plus its node tree, so any YAML path can be turned into a line number."""

    def __init__(self, text: str, file: str):
        self.file = file
        try:
            self.root = yaml.compose(text, Loader=_UniqueKeyLoader)
            self.data = yaml.load(text, Loader=_UniqueKeyLoader)
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            line = mark.line + 1 if mark else None
            raise SpecError(f"invalid YAML: {e.problem or e}", file=file, line=line) from None
        except yaml.YAMLError as e:
            raise SpecError(f"invalid YAML: {e}", file=file) from None

    def line_of(self, path: tuple[Any, ...]) -> int | None:
        """1-based line of the deepest node along `path` that exists."""
        node, line = self.root, None
        for part in path:
            if node is None:
                break
            line = node.start_mark.line + 1
            if isinstance(node, yaml.MappingNode):
                node = next((v for k, v in node.value if k.value == str(part)), None)
                if node is None:  # point at the key's parent mapping
                    break
            elif (
                isinstance(node, yaml.SequenceNode)
                and isinstance(part, int)
                and part < len(node.value)
            ):
                node = node.value[part]
            else:
                break
        if node is not None:
            line = node.start_mark.line + 1
        return line

    def error(
        self, path: tuple[Any, ...], message: str, cls: type[SpecError] = SpecError
    ) -> SpecError:
        return cls(
            message,
            file=self.file,
            path=".".join(str(p) for p in path) or None,
            line=self.line_of(path),
        )


def _model_at(model: Any, parts: tuple[Any, ...], data: Any) -> Any:
    """The pydantic model found by following `parts` (fields and dict keys) from `model`, reading
    the raw `data` alongside (a `models:` entry's class is the one its `backend` names)."""
    t = model
    for part in parts:
        if isinstance(data, dict):
            data = data.get(part)
        if isinstance(t, type) and issubclass(t, BaseModel):
            field = t.model_fields.get(str(part))
            t = field.annotation if field else None
        elif typing.get_origin(t) is dict:
            t = typing.get_args(t)[1]
        else:
            return None
        if typing.get_origin(t) in (typing.Union, types.UnionType):  # `X | None`: the model in it
            t = next(
                (a for a in typing.get_args(t) if isinstance(a, type) and issubclass(a, BaseModel)),
                t,
            )
        if t is ModelSpec and isinstance(data, dict):
            try:
                t = ModelSpec.options_class(data)
            except ValidationError:
                return t
    return t


def _pydantic_to_spec_error(
    doc: SourceDoc, err: ValidationError, model: type[BaseModel], prefix: tuple[Any, ...] = ()
) -> SpecError:
    """The first pydantic error as a SpecError with a YAML path and a did-you-mean."""
    # A misspelt key also makes the real one "missing": report the misspelling, it explains both.
    e = sorted(err.errors(), key=lambda x: x["type"] != "extra_forbidden")[0]
    loc = prefix + tuple(e["loc"])
    if e["type"] == "extra_forbidden":
        owner = _model_at(model, e["loc"][:-1], doc.data)
        allowed = list(getattr(owner, "model_fields", {}))
        msg = (
            f"unknown field '{loc[-1]}'{did_you_mean(loc[-1], allowed)}; "
            f"expected one of: {', '.join(allowed)}"
        )
        if isinstance(owner, type) and issubclass(owner, ModelSpec):
            elsewhere = [b for b in BACKENDS.names() if loc[-1] in BACKENDS[b].options.model_fields]
            if elsewhere:
                msg += f" ('{loc[-1]}' is an option of backend {' / '.join(elsewhere)})"
    elif e["type"] == "missing":
        msg = f"required field '{loc[-1]}' is missing"
    else:
        msg = f"{e['msg']} (got {e.get('input')!r})"
    return doc.error(loc, msg)


def _mapping(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any], file: str) -> None:
    """Set dotted overrides into the raw document before validation: `stage.param`,
    `models.name.field` for a declared model, `index` (true / false / a mapping) or `index.field`
    (which turns the index on)."""
    for dotted, value in overrides.items():
        head, dot, rest = dotted.partition(".")
        if head == "index":
            if not dot:
                data["index"] = value
            else:
                if not isinstance(data.get("index"), dict):
                    data["index"] = {}
                data["index"][rest] = value
            continue
        if head == "models":
            name, dot, field = rest.partition(".")
            models = _mapping(data, "models")
            if not dot or not field:
                raise SpecError(
                    f"override '{dotted}' must look like 'models.name.field'", file=file
                )
            if name not in models:
                raise SpecError(
                    f"override '{dotted}': no model '{name}'{did_you_mean(name, models)}; "
                    f"declared models: {', '.join(models) or 'none'}",
                    file=file,
                )
            _model_entry(models, name)[field] = value
            continue
        stages = _mapping(data, "stages")
        if not dot or not rest:
            raise SpecError(
                f"override '{dotted}' must look like 'stage.param', 'models.name.field' or 'index'",
                file=file,
            )
        if head not in stages:
            raise SpecError(
                f"override '{dotted}': no stage '{head}'{did_you_mean(head, stages)}", file=file
            )
        stages[head].setdefault("params", {})[rest] = value


def _model_entry(models: dict[str, Any], name: str) -> dict[str, Any]:
    """The raw mapping of a declared model (expanding the `name: id` shorthand)."""
    if isinstance(models[name], str):
        models[name] = {"id": models[name]}
    return models[name]


PRICED_AS_DECLARED = "declared"
"""`priced_as` value in `model_params`: price each model as the `id` its YAML declares, whatever
`id` the same edit puts in its place (`--offline`: a random-weight stand-in runs, the declared
checkpoint is priced)."""


def apply_model_params(data: dict[str, Any], fields: dict[str, Any]) -> None:
    """Set `fields` on every declared model whose backend has them (`QA(model=...)`,
    `--offline`: `id` on all, `device` where it runs in process); none declared: no-op."""
    models = _mapping(data, "models")
    for name in models:
        if isinstance(models[name], (str, dict)):
            entry = _model_entry(models, name)
            try:
                known = ModelSpec.options_class(entry).model_fields
            except ValidationError:  # an unknown backend: validation reports it with its path
                known = fields
            given = {k: v for k, v in fields.items() if k in known}
            if given.get("priced_as") == PRICED_AS_DECLARED:
                given["priced_as"] = entry.get("priced_as") or entry.get("id")
            entry.update(given)


def apply_type_params(
    data: dict[str, Any],
    by_type: dict[str, dict[str, Any]],
    params_of: Callable[[str], Iterable[str]],
) -> None:
    """Set params on every stage of a type (type "*": every stage), where its type has them.
    params_of(type) names the params a stage type takes (none for an unknown type, which the
    pipeline then reports with its YAML path)."""
    for st in _mapping(data, "stages").values():
        if not isinstance(st, dict) or not isinstance(st.get("type"), str):
            continue
        known = set(params_of(st["type"]))
        for type_ in ("*", st["type"]):  # the type's own params win over the wildcard's
            for param, value in by_type.get(type_, {}).items():
                if param in known:
                    st.setdefault("params", {})[param] = value


def load_spec(
    source: str | Path,
    overrides: dict[str, Any] | None = None,
    text: str | None = None,
    *,
    model_params: dict[str, Any] | None = None,
    type_params: dict[str, dict[str, Any]] | None = None,
    params_of: Callable[[str], Iterable[str]] = lambda t: (),
) -> tuple[PipelineSpec, SourceDoc]:
    """Read and shape-check a pipeline file (or `text` labelled `source`), after the edits of
    the module docstring."""
    file = str(source)
    if text is None:
        path = Path(source)
        if not path.is_file():
            raise SpecError("pipeline file not found", file=file)
        text = path.read_text(encoding="utf-8")
    doc = SourceDoc(text, file)
    if not isinstance(doc.data, dict):
        raise SpecError(
            "a pipeline must be a YAML mapping with name, inputs, stages, outputs",
            file=file,
            line=1,
        )
    if model_params:
        apply_model_params(doc.data, model_params)
    if type_params:
        apply_type_params(doc.data, type_params, params_of)
    if overrides:
        apply_overrides(doc.data, overrides, file)
    try:
        spec = PipelineSpec.model_validate(doc.data)
    except ValidationError as err:
        raise _pydantic_to_spec_error(doc, err, PipelineSpec) from None
    return spec, doc
