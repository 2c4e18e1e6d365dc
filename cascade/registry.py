"""Stage types by short name: the functions over `cascade.plugins.stages` that stages, pipelines
and tools use (timm-style).

Built-in stages register when `cascade.stages` / `cascade.routers` are imported; third-party
packages register through the `cascade.stages` entry-point group (each entry point names a module
to import). YAML names types, never import paths.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import plugins

if TYPE_CHECKING:
    from .stage import Stage

__all__ = [
    "register",
    "unregister",
    "get_stage_class",
    "stage_types",
    "heavy_stage_types",
    "ENTRY_POINT_GROUP",
]

ENTRY_POINT_GROUP = plugins.stages.group


def register(type_name: str, cls: type[Stage]) -> None:
    """Add a stage class (what `@stage` does); a name another class holds is an error."""
    plugins.stages.register(type_name, cls)


def unregister(type_name: str) -> None:
    """Remove a type (for tests and notebooks that define throwaway stages)."""
    plugins.stages.unregister(type_name)


def get_stage_class(type_name: str) -> type[Stage]:
    """The class registered under `type_name`; an unknown name suggests a close one."""
    return plugins.stages[type_name]


def stage_types() -> dict[str, type[Stage]]:
    """Every registered stage type, by name (sorted)."""
    return {name: plugins.stages[name] for name in plugins.stages.names()}


def heavy_stage_types() -> tuple[str, ...]:
    """The registered stage types that declare themselves heavy (`Stage.serving.heavy`): on Ray
    each runs in its own deployment."""
    return tuple(name for name, cls in stage_types().items() if cls.serving.heavy)
