"""MkDocs hook: the YAML reference's tables, generated from the stage registry and the models.

Each registered stage type's `describe()` (what `cascade stages --json` prints: the class's
docstring, its ports from `run()`'s annotations, its `Params` pydantic fields with type, default
and description, a router's branches, a heavy stage's serving traits) becomes one section of
`yaml_reference.md` at the `<!-- stage-reference -->` marker; each registered VLM backend's
`models:` options (its `ModelSpec` subclass) go at `<!-- models-reference -->` and the `index:`
block's fields at `<!-- index-reference -->`. The page cannot drift from the code.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

MARKER = "<!-- stage-reference -->"
MODELS_MARKER = "<!-- models-reference -->"
INDEX_MARKER = "<!-- index-reference -->"


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _code(value: Any) -> str:
    return f"`{_cell(value)}`" if value not in (None, "") else ""


def stage_section(d: dict[str, Any]) -> str:
    """One stage type's section: description, ports, params."""
    lines = [f"### `{d['type']}`", "", d["description"], ""]
    if "branches" in d:
        lines += [f"Router; branches: {', '.join(f'`{b}`' for b in d['branches'])}.", ""]
    if "serving" in d:
        s = d["serving"]
        traits = [f"{s['num_cpus']:g} CPU", f"{s['num_gpus']:g} GPU", f"{s['pool']} pool"]
        traits += ["batches"] if s["batch"] else []
        traits += [f"affinity: `{s['affinity']}`"] if s["affinity"] else []
        lines += [f"Heavy on Ray Serve (a deployment of its own): {', '.join(traits)}.", ""]
    lines += ["| port | direction | type | required |", "|---|---|---|---|"]
    for name, p in d["inputs"].items():
        lines.append(f"| `{name}` | in | {_code(p['type'])} | {'yes' if p['required'] else 'no'} |")
    for name, p in d["outputs"].items():
        lines.append(f"| `{name}` | out | {_code(p['type'])} | |")
    lines.append("")
    if d["params"]:
        lines += ["| param | type | default | description |", "|---|---|---|---|"]
        for name, p in d["params"].items():
            default = "required" if p["required"] else _code(repr(p["default"]))
            lines.append(
                f"| `{name}` | {_code(p['type'])} | {default} | {_cell(p['description'])} |"
            )
    else:
        lines.append("No params.")
    return "\n".join(lines) + "\n"


def stage_reference() -> str:
    """Every registered stage type's section, by name."""
    from cascade.registry import stage_types

    return "\n".join(stage_section(cls.describe()) for cls in stage_types().values())


def fields_table(model: type[BaseModel]) -> str:
    """A pydantic model's fields: name, type, default, description."""
    from cascade.types import type_name

    lines = ["| field | type | default | description |", "|---|---|---|---|"]
    for name, f in model.model_fields.items():
        default = "required" if f.is_required() else _code(repr(f.get_default()))
        lines.append(
            f"| `{name}` | {_code(type_name(f.annotation))} | {default} | "
            f"{_cell(f.description or '')} |"
        )
    return "\n".join(lines) + "\n"


def models_reference() -> str:
    """Each registered backend's `models:` entry fields."""
    from cascade.vlm.options import BACKENDS

    parts = []
    for name in BACKENDS.names():
        options = BACKENDS[name].options
        doc = (options.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        parts.append(f"### `backend: {name}`\n\n{doc}\n\n{fields_table(options)}")
    return "\n".join(parts)


def index_reference() -> str:
    """The `index:` block's fields."""
    from cascade.index.videoindex import IndexSpec

    return fields_table(IndexSpec)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fill the markers on the YAML reference page."""
    for marker, make in (
        (MARKER, stage_reference),
        (MODELS_MARKER, models_reference),
        (INDEX_MARKER, index_reference),
    ):
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
