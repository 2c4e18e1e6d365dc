"""The one registry of stage types: short names -> classes (timm-style).

Built-in stages register when `cascade.stages` / `cascade.routers` are imported; third-party
packages register through the `cascade.stages` entry-point group (each entry point names a module
to import). YAML names types, never import paths.
"""
from __future__ import annotations

import importlib
import threading
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from .errors import RegistryError, did_you_mean

if TYPE_CHECKING:
    from .stage import Stage

ENTRY_POINT_GROUP = "cascade.stages"
_REGISTRY: dict[str, type["Stage"]] = {}
_loaded = False
_loading = False
_load_lock = threading.RLock()


def register(type_name: str, cls: type["Stage"]) -> None:
    if not _loaded and not _loading:
        # A user's stage must meet the built-ins now, so a name clash is reported at its definition.
        load_plugins()
    existing = _REGISTRY.get(type_name)
    if existing is not None and existing is not cls:
        raise RegistryError(f"stage type '{type_name}' is already registered by "
                            f"{existing.__module__}.{existing.__qualname__}; "
                            f"{cls.__module__}.{cls.__qualname__} cannot take the same name")
    _REGISTRY[type_name] = cls


def unregister(type_name: str) -> None:
    """Remove a type (for tests and notebooks that define throwaway stages)."""
    _REGISTRY.pop(type_name, None)


def load_plugins() -> None:
    """Import the built-in stage library and every `cascade.stages` entry point, once."""
    global _loaded, _loading
    with _load_lock:
        if _loaded or _loading:
            return
        _loading = True
        try:
            _import_all()
        finally:
            _loading = False
        _loaded = True


def import_submodules(package: str, path: list[str]) -> None:
    """Import every public module of a package folder (how stages/ and routers/ register)."""
    import pkgutil

    for module in pkgutil.iter_modules(path):
        if not module.name.startswith("_"):
            importlib.import_module(f"{package}.{module.name}")


def _import_all() -> None:
    importlib.import_module("cascade.stages")
    importlib.import_module("cascade.routers")
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as e:  # name the plugin: a bare ImportError would not say which
            raise RegistryError(f"entry point '{ep.name}' ({ep.value}) in group "
                                f"'{ENTRY_POINT_GROUP}' failed to import: {e}") from e


def get_stage_class(type_name: str) -> type["Stage"]:
    load_plugins()
    try:
        return _REGISTRY[type_name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise RegistryError(f"unknown stage type '{type_name}'{did_you_mean(type_name, _REGISTRY)}; "
                            f"registered types: {known}") from None


def stage_types() -> dict[str, type["Stage"]]:
    load_plugins()
    return dict(sorted(_REGISTRY.items()))
