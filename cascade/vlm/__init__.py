"""The VLM runtime: backends, model families, visual token reduction, KV prefix cache, sessions,
decoding (greedy, sampled, streamed) and the bill of every call.

    from cascade.vlm import VLM, ReductionConfig
    vlm = VLM.load("Qwen/Qwen2-VL-2B-Instruct", kv_cache_bytes=2 << 30)

Names are imported on first use (PEP 562), so the light parts (`cascade.vlm.options`, the
reduction registry) load without torch: a pipeline validates its `models:` block and reduction
names without importing a model library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the names below are, for readers and type checkers
    from .backend import VLM, Backend, Stream
    from .decode import SamplingParams, TokenEvent
    from .families import FAMILIES, Family, FamilyRuntime, ImageLimits, register_family
    from .kv_cache import KVPrefixCache, PrefixState
    from .options import BACKENDS, ModelSpec, register_backend
    from .press import KVConfig, Press, press_names, register_press
    from .reduction import Reduction, ReductionConfig, reduction_names, register_reduction
    from .result import VLMResult
    from .tiny import build_tiny_vlm, default_tiny_dir, register_tiny_recipe, tiny_families

_WHERE = {
    "VLM": "backend",
    "Backend": "backend",
    "Stream": "backend",
    "SamplingParams": "decode",
    "TokenEvent": "decode",
    "FAMILIES": "families",
    "Family": "families",
    "FamilyRuntime": "families",
    "ImageLimits": "families",
    "register_family": "families",
    "KVPrefixCache": "kv_cache",
    "PrefixState": "kv_cache",
    "BACKENDS": "options",
    "ModelSpec": "options",
    "register_backend": "options",
    "KVConfig": "press",
    "Press": "press",
    "press_names": "press",
    "register_press": "press",
    "Reduction": "reduction",
    "ReductionConfig": "reduction",
    "reduction_names": "reduction",
    "register_reduction": "reduction",
    "VLMResult": "result",
    "build_tiny_vlm": "tiny",
    "default_tiny_dir": "tiny",
    "register_tiny_recipe": "tiny",
    "tiny_families": "tiny",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
