"""The VLM runtime: backends, model families, visual token reduction, KV prefix cache, sessions,
decoding (greedy, sampled, streamed) and the bill of every call."""
from .backend import BACKENDS, VLM, Backend, Stream, register_backend
from .decode import Sampling, TokenEvent
from .families import FAMILIES, Family, ImageLimits, register_family
from .kv_cache import KVPrefixCache, PrefixState
from .reduction import METHODS, PRE_LLM_METHODS, ReductionConfig
from .result import VLMResult
from .tiny import build_tiny_vlm, default_tiny_dir, tiny_families

__all__ = ["VLM", "VLMResult", "ReductionConfig", "KVPrefixCache", "PrefixState", "Backend",
           "BACKENDS", "register_backend", "METHODS", "PRE_LLM_METHODS", "build_tiny_vlm",
           "default_tiny_dir", "tiny_families", "Sampling", "TokenEvent", "Stream", "FAMILIES",
           "Family", "ImageLimits", "register_family"]
