"""One registry for everything vlm-cascade looks up by a short name: stage types, VLM families,
VLM backends, visual token reduction methods and tiny-checkpoint recipes.

    from cascade import plugins
    plugins.stages["thumbnail"]            # a Stage class
    plugins.reductions.names()             # ['dart', 'divprune', 'fastv', 'none', 'pool', ...]

A `Registry` maps names (what YAML and the Python API use; never import paths) to what they name.
Built-ins register when their modules are imported; a registry imports them, and every module its
entry-point group names (third-party packages), on its first lookup, so listing, validating and
did-you-mean suggestions always see everything installed. Registering a name twice is an error
that names both definitions.

Entry-point groups (each entry point names a module to import; importing it registers):
`cascade.stages`, `cascade.families`, `cascade.backends`, `cascade.reductions`, `cascade.presses`,
`cascade.tiny`.

This module imports nothing of vlm-cascade but its errors: it sits below every layer
(docs/architecture.md), so any layer may register or look up.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic_core import CoreSchema, core_schema

from .errors import RegistryError, did_you_mean

__all__ = [
    "Registry",
    "NameOf",
    "import_submodules",
    "stages",
    "families",
    "backends",
    "reductions",
    "presses",
    "tiny_recipes",
]

T = TypeVar("T")


def import_submodules(package: str, path: list[str]) -> None:
    """Import every public module of a package folder (how a folder of plugins registers)."""
    for module in pkgutil.iter_modules(path):
        if not module.name.startswith("_"):
            importlib.import_module(f"{package}.{module.name}")


def _origin(item: Any) -> str:
    return (
        f"{getattr(item, '__module__', '?')}.{getattr(item, '__qualname__', type(item).__name__)}"
    )


class Registry(Mapping[str, T], Generic[T]):
    """Names -> items of one kind (a read-only mapping that loads the built-ins and the entry
    points on first use).

    kind: what a name names, for messages ("stage type"). builtins: modules that register the
    built-in items. group: the entry-point group third-party packages register through."""

    def __init__(self, kind: str, builtins: tuple[str, ...], group: str):
        self.kind, self.builtins, self.group = kind, builtins, group
        self._items: dict[str, T] = {}
        self._state = "new"  # -> "loading" -> "loaded"
        self._lock = threading.RLock()

    # -- registering --------------------------------------------------------------------------
    def register(self, name: str, item: T) -> T:
        """Add `item` under `name`; a name another item holds is an error (re-registering the same
        item is not). Loads the built-ins first, so a clash with one is reported right here."""
        if not isinstance(name, str) or not name:
            raise RegistryError(f"a {self.kind} needs a non-empty name, got {name!r}")
        self.load()
        with self._lock:
            existing = self._items.get(name)
            if existing is not None and existing is not item:
                raise RegistryError(
                    f"{self.kind} '{name}' is already registered by "
                    f"{_origin(existing)}; {_origin(item)} cannot take the same name"
                )
            self._items[name] = item
        return item

    def unregister(self, name: str) -> None:
        """Remove a name (tests and notebooks that define throwaway items)."""
        with self._lock:
            self._items.pop(name, None)

    def load(self) -> None:
        """Import the built-ins and every entry point of the group, once (re-entrant: modules
        being imported register into the registry that imports them)."""
        with self._lock:
            if self._state != "new":
                return
            self._state = "loading"
            try:
                for module in self.builtins:
                    importlib.import_module(module)
                for ep in entry_points(group=self.group):
                    try:
                        ep.load()
                    except (
                        Exception
                    ) as e:  # name the plugin: a bare ImportError would not say which
                        raise RegistryError(
                            f"entry point '{ep.name}' ({ep.value}) in group "
                            f"'{self.group}' failed to import: {e}"
                        ) from e
            except BaseException:
                self._state = "new"  # the next lookup tries again and reports the error again
                raise
            self._state = "loaded"

    # -- looking up ---------------------------------------------------------------------------
    def get(self, name: str, default: Any = None) -> Any:
        """The item, or `default` for an unknown name (`registry[name]` raises instead)."""
        self.load()
        return self._items.get(name, default)

    def __getitem__(self, name: str) -> T:
        self.load()
        try:
            return self._items[name]
        except KeyError:
            raise RegistryError(self.unknown(name)) from None

    def unknown(self, name: str) -> str:
        """The message for a name nobody registered: a suggestion and what is registered."""
        self.load()
        return (
            f"unknown {self.kind} '{name}'{did_you_mean(name, self._items)}; "
            f"registered {self.kind}s: {', '.join(sorted(self._items)) or 'none'}"
        )

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        self.load()
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self.load()
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"


class NameOf:
    """Pydantic metadata for a string naming an item of `registry`: checked against the registry
    when validated (did-you-mean), listed as an enum in JSON schema and in `cascade stages`.

        reduction: Annotated[str, NameOf(plugins.reductions)] = "none"
    """

    def __init__(self, registry: Registry[Any]):
        self.registry = registry

    def choices(self) -> list[str]:
        return self.registry.names()

    def check(self, value: str) -> str:
        choices = self.choices()
        if value not in choices:
            raise ValueError(
                f"unknown {self.registry.kind} '{value}'{did_you_mean(value, choices)}; "
                f"choose one of {choices}"
            )
        return value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> Any:
        out = handler(schema)
        out["enum"] = self.choices()
        return out


stages: Registry[Any] = Registry(
    "stage type", ("cascade.stages", "cascade.routers"), "cascade.stages"
)
families: Registry[Any] = Registry("model type", ("cascade.vlm.families",), "cascade.families")
backends: Registry[Any] = Registry("VLM backend", ("cascade.vlm.options",), "cascade.backends")
reductions: Registry[Any] = Registry(
    "reduction method", ("cascade.vlm.reduction",), "cascade.reductions"
)
presses: Registry[Any] = Registry("KV press", ("cascade.vlm.press",), "cascade.presses")
tiny_recipes: Registry[Any] = Registry(
    "tiny VLM family", ("cascade.vlm.tiny_recipes",), "cascade.tiny"
)
