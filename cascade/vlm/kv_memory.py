"""How much KV this process holds, for the server's /metrics: the KV prefix caches' entries and
the KV of every running decode batch (sessions' caches are their own and not counted here)."""

from __future__ import annotations

from ..cache import _LIVE as _CACHES
from .batcher import _LIVE as _BATCHERS
from .kv_cache import KVPrefixCache

__all__ = ["kv_occupancy"]


def kv_occupancy() -> dict[str, int]:
    """{"prefix_cache": bytes of every live KV prefix cache, "decoding": bytes of the KV of every
    running continuous batch}."""
    return {
        "prefix_cache": sum(c.bytes for c in list(_CACHES) if isinstance(c, KVPrefixCache)),
        "decoding": sum(b.kv_bytes for b in list(_BATCHERS)),
    }
