"""The VLM runtime: backends, visual token reduction, KV prefix cache, sessions, accounting."""
from .backend import BACKENDS, VLM, Backend, register_backend
from .kv_cache import KVPrefixCache, PrefixState
from .reduction import METHODS, PRE_LLM_METHODS, ReductionConfig
from .result import VLMResult
from .tiny import build_tiny_vlm, default_tiny_dir

__all__ = ["VLM", "VLMResult", "ReductionConfig", "KVPrefixCache", "PrefixState", "Backend",
           "BACKENDS", "register_backend", "METHODS", "PRE_LLM_METHODS", "build_tiny_vlm",
           "default_tiny_dir"]
