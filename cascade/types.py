"""Port types: readable names, assignability checks for edges, and the YAML input type names."""

from __future__ import annotations

import collections.abc as cabc
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Union

from .artifacts import Image
from .decoding import SamplingParams
from .plugins import NameOf

# Types a pipeline's `inputs:` may name in YAML, and the Python type each becomes. `history`: a
# conversation's earlier (question, answer) turns, for a VLM that puts them in its prompt;
# `sampling`: a request's decoding settings (`cascade.decoding.SamplingParams`, or a mapping of its
# fields), for a VLM stage to apply over its own.
INPUT_TYPES: dict[str, Any] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "path": Path,
    "image": Image,
    "images": list[Image],
    "video": Path,
    "history": list[tuple[str, str]],
    "sampling": SamplingParams,
}

_SEQUENCES = (list, tuple, cabc.Sequence)


def _is_union(t: Any) -> bool:
    return typing.get_origin(t) in (Union, types.UnionType)


def type_name(t: Any) -> str:
    """`list[Image]`, `Image | None`, `str`: how a port type is printed in errors and docs."""
    if t is Any:
        return "Any"
    if typing.get_origin(t) is Annotated:  # a registry name lists what is registered
        base, *meta = typing.get_args(t)
        names = next((m for m in meta if isinstance(m, NameOf)), None)
        return type_name(base) if names is None else f"one of [{', '.join(names.choices())}]"
    if t is type(None):
        return "None"
    if _is_union(t):
        return " | ".join(type_name(a) for a in typing.get_args(t))
    origin = typing.get_origin(t)
    if origin is not None:
        args = ", ".join("..." if a is Ellipsis else type_name(a) for a in typing.get_args(t))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    return getattr(t, "__name__", str(t))


def is_assignable(src: Any, dst: Any) -> bool:
    """Can a value of type `src` flow into a port of type `dst`? (covariant containers)"""
    if dst is Any or src is Any or src == dst:
        return True
    if _is_union(src):
        return all(is_assignable(s, dst) for s in typing.get_args(src))
    if _is_union(dst):
        return any(is_assignable(src, d) for d in typing.get_args(dst))
    s_origin, d_origin = typing.get_origin(src), typing.get_origin(dst)
    if d_origin is not None:
        if s_origin is None:
            return False
        if d_origin in _SEQUENCES and s_origin in _SEQUENCES:
            if d_origin is not cabc.Sequence and s_origin is not d_origin:
                return False
            return is_assignable(_item(src), _item(dst))
        if s_origin is not d_origin:
            return False
        return all(
            is_assignable(a, b)
            for a, b in zip(typing.get_args(src), typing.get_args(dst), strict=False)
        )
    if s_origin is not None:  # list[Image] into a port typed plain `list`
        return isinstance(dst, type) and isinstance(s_origin, type) and issubclass(s_origin, dst)
    if dst is float and src is int:
        return True
    if dst is Path and src is str or dst is str and src is Path:
        return True  # a path given as text is a path
    return isinstance(src, type) and isinstance(dst, type) and issubclass(src, dst)


def strip_none(t: Any) -> Any:
    """`Answer | None` -> `Answer`; other types unchanged."""
    if not _is_union(t):
        return t
    args = tuple(a for a in typing.get_args(t) if a is not type(None))
    return Union[args] if len(args) > 1 else (args[0] if args else t)  # noqa: UP007 (built at run time)


def _item(t: Any) -> Any:
    args = [a for a in typing.get_args(t) if a is not Ellipsis]
    if not args:
        return Any
    return args[0] if len(args) == 1 or typing.get_origin(t) is not tuple else Union[tuple(args)]  # noqa: UP007 (built at run time)


__all__ = ["INPUT_TYPES", "type_name", "is_assignable", "strip_none"]
