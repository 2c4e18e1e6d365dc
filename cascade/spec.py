"""Pipeline YAML -> a validated `PipelineSpec`, with errors that name the file, line and YAML path.

Only `yaml.safe_load`-level constructs are accepted (a SafeLoader that also rejects duplicate keys).
This module checks the *shape* of the document; `cascade.pipeline` checks it against the registered
stage types (params, ports, edge types, branches) and `cascade.graph` checks cycles.
"""
from __future__ import annotations

import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import SpecError, did_you_mean

__all__ = ["PipelineSpec", "StageSpec", "InputSpec", "SourceDoc", "load_spec", "parse_ref",
           "flatten_refs"]

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
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    stages: dict[str, StageSpec]
    outputs: dict[str, Ref]

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
                    None, None, f"duplicate key '{key}' (first defined on line {seen[key] + 1})",
                    key_node.start_mark)
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
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
            else:
                break
        if node is not None:
            line = node.start_mark.line + 1
        return line

    def error(self, path: tuple[Any, ...], message: str, cls: type[SpecError] = SpecError) -> SpecError:
        return cls(message, file=self.file, path=".".join(str(p) for p in path) or None,
                   line=self.line_of(path))


def _model_at(model: Any, parts: tuple[Any, ...]) -> Any:
    """The pydantic model found by following `parts` (fields and dict keys) from `model`."""
    t = model
    for part in parts:
        if isinstance(t, type) and issubclass(t, BaseModel):
            field = t.model_fields.get(str(part))
            t = field.annotation if field else None
        elif typing.get_origin(t) is dict:
            t = typing.get_args(t)[1]
        else:
            return None
    return t


def _pydantic_to_spec_error(doc: SourceDoc, err: ValidationError, model: type[BaseModel],
                            prefix: tuple[Any, ...] = ()) -> SpecError:
    """The first pydantic error as a SpecError with a YAML path and a did-you-mean."""
    # A misspelt key also makes the real one "missing": report the misspelling, it explains both.
    e = sorted(err.errors(), key=lambda x: x["type"] != "extra_forbidden")[0]
    loc = prefix + tuple(e["loc"])
    if e["type"] == "extra_forbidden":
        allowed = list(getattr(_model_at(model, e["loc"][:-1]), "model_fields", {}))
        msg = (f"unknown field '{loc[-1]}'{did_you_mean(loc[-1], allowed)}; "
               f"expected one of: {', '.join(allowed)}")
    elif e["type"] == "missing":
        msg = f"required field '{loc[-1]}' is missing"
    else:
        msg = f"{e['msg']} (got {e.get('input')!r})"
    return doc.error(loc, msg)


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any], file: str) -> None:
    """Set `stage.param` (dotted) overrides into the raw document before validation."""
    for dotted, value in overrides.items():
        stage_name, dot, param = dotted.partition(".")
        stages = data.get("stages") or {}
        if not dot or not param:
            raise SpecError(f"override '{dotted}' must look like 'stage.param'", file=file)
        if stage_name not in stages:
            raise SpecError(f"override '{dotted}': no stage '{stage_name}'"
                            f"{did_you_mean(stage_name, stages)}", file=file)
        stages[stage_name].setdefault("params", {})[param] = value


def load_spec(source: str | Path, overrides: dict[str, Any] | None = None,
              text: str | None = None) -> tuple[PipelineSpec, SourceDoc]:
    """Read and shape-check a pipeline file (or `text` labelled `source`)."""
    file = str(source)
    if text is None:
        path = Path(source)
        if not path.is_file():
            raise SpecError("pipeline file not found", file=file)
        text = path.read_text(encoding="utf-8")
    doc = SourceDoc(text, file)
    if not isinstance(doc.data, dict):
        raise SpecError("a pipeline must be a YAML mapping with name, inputs, stages, outputs",
                        file=file, line=1)
    if overrides:
        apply_overrides(doc.data, overrides, file)
    try:
        spec = PipelineSpec.model_validate(doc.data)
    except ValidationError as err:
        raise _pydantic_to_spec_error(doc, err, PipelineSpec) from None
    return spec, doc
