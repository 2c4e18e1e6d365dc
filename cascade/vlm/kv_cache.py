"""A KV prefix cache for the visual prefix: compute the image tokens once, answer many questions.

The prefix is everything before the question in the chat template: system prompt, the user turn's
opening, and the (reduced) visual tokens. Its key is (model id, image-processor settings, reduction
config, media content hashes, prefix text) and never the question, so every question about the same
media hits. Entries live on the model's device, in a byte-bounded LRU (`cascade.cache.LRUCache`).

With `int8=True` an entry is stored quantized: keys per channel (outlier channels in keys are
stable across tokens), values per token (KIVI's split), symmetric int8 with fp scales, ~2x (bf16)
to ~4x (fp32) smaller. `cascade.kernels.kv_quant` does the work when it is installed; otherwise a
torch implementation here does the same math. int8 entries give close, not identical, answers;
fp entries give exactly the tokens of recomputation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..cache import LRUCache, content_hash

__all__ = ["KVPrefixCache", "PrefixState", "cache_layers", "new_dynamic_cache", "quantize_kv",
           "dequantize_kv"]


@dataclass
class TorchQuantizedKV:
    """int8 keys (per-channel scales) and values (per-token scales), plus the original dtype."""

    k: torch.Tensor
    k_scale: torch.Tensor
    v: torch.Tensor
    v_scale: torch.Tensor
    dtype: torch.dtype


def _torch_quantize_kv(k: torch.Tensor, v: torch.Tensor) -> TorchQuantizedKV:
    """k, v: [batch, heads, seq, head_dim]. Keys scaled per (head, channel), values per token."""
    k_scale = k.float().abs().amax(dim=-2, keepdim=True).clamp(min=1e-8) / 127.0
    v_scale = v.float().abs().amax(dim=-1, keepdim=True).clamp(min=1e-8) / 127.0
    qk = torch.round(k.float() / k_scale).clamp(-127, 127).to(torch.int8)
    qv = torch.round(v.float() / v_scale).clamp(-127, 127).to(torch.int8)
    return TorchQuantizedKV(qk, k_scale, qv, v_scale, k.dtype)


def _torch_dequantize_kv(q: TorchQuantizedKV) -> tuple[torch.Tensor, torch.Tensor]:
    return (q.k.float() * q.k_scale).to(q.dtype), (q.v.float() * q.v_scale).to(q.dtype)


def quantize_kv(k: torch.Tensor, v: torch.Tensor) -> Any:
    """int8-quantize one layer's K/V with cascade.kernels.kv_quant if present, else in torch."""
    try:
        from cascade.kernels.kv_quant import quantize_kv as kernel_quantize
    except ImportError:
        return _torch_quantize_kv(k, v)
    return kernel_quantize(k, v, impl="auto")


def dequantize_kv(q: Any) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(q, TorchQuantizedKV):
        return _torch_dequantize_kv(q)
    from cascade.kernels.kv_quant import dequantize_kv as kernel_dequantize

    return kernel_dequantize(q)


def new_dynamic_cache(config: Any) -> Any:
    """An empty transformers DynamicCache for a decoder config."""
    from transformers import DynamicCache

    try:
        return DynamicCache(config=config)
    except TypeError:  # transformers < 4.56 has no config argument
        return DynamicCache()


def cache_layers(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per-layer (keys, values) of a transformers DynamicCache (old and new layouts)."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))


@dataclass
class PrefixState:
    """A prefilled prefix: per-layer KV ([1, kv_heads, length, head_dim]) or its int8 form, and
    what continuing after it needs (next text position: M-RoPE's max position + 1)."""

    layers: list[Any]
    length: int
    next_pos: int
    visual_tokens: int
    visual_tokens_before: int
    text_tokens: int
    quantized: bool = False

    def kv(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """fp (k, v) per layer; dequantized for int8 entries."""
        return [dequantize_kv(x) for x in self.layers] if self.quantized else list(self.layers)

    def to_cache(self, config: Any) -> Any:
        """A fresh DynamicCache holding this prefix. DynamicCache appends with torch.cat, so the
        stored tensors are never written to and the entry stays valid for the next question."""
        cache = new_dynamic_cache(config)
        for i, (k, v) in enumerate(self.kv()):
            cache.update(k, v, i)
        return cache

    @property
    def nbytes(self) -> int:
        def size(x: Any) -> int:
            if isinstance(x, torch.Tensor):
                return x.element_size() * x.numel()
            if isinstance(x, (list, tuple)):
                return sum(size(y) for y in x)
            if hasattr(x, "__dict__"):
                return sum(size(y) for y in vars(x).values())
            return 0

        return size(self.layers)


class KVPrefixCache:
    """Byte-bounded LRU of prefilled prefixes with hit/miss/eviction counters.

    max_bytes: budget for all entries together (an entry larger than the budget is not stored).
    int8: store entries quantized (see module docstring).
    """

    def __init__(self, max_bytes: int = 2 << 30, int8: bool = False):
        self.int8 = bool(int8)
        self._lru = LRUCache(max_bytes, size_of=lambda s: s.nbytes)

    @staticmethod
    def key(model_id: str, preprocessing: tuple, reduction: tuple, media_hashes: list[str],
            prefix_text: str) -> str:
        """The cache key; it never includes the question."""
        return content_hash({"model": model_id, "preprocessing": [str(p) for p in preprocessing],
                             "reduction": [str(r) for r in reduction],
                             "media": list(media_hashes), "prefix": prefix_text}, key="kv_prefix")

    def get(self, key: str) -> PrefixState | None:
        return self._lru.get(key)

    def put(self, key: str, state: PrefixState) -> PrefixState:
        """Store `state` (quantized first when int8) and return the stored form."""
        if self.int8 and not state.quantized:
            state = PrefixState([quantize_kv(k, v) for k, v in state.layers], state.length,
                                state.next_pos, state.visual_tokens, state.visual_tokens_before,
                                state.text_tokens, quantized=True)
        self._lru.put(key, state)
        return state

    def clear(self) -> None:
        self._lru.clear()

    @property
    def hits(self) -> int:
        return self._lru.hits

    @property
    def misses(self) -> int:
        return self._lru.misses

    @property
    def evictions(self) -> int:
        return self._lru.evictions

    @property
    def bytes(self) -> int:
        return self._lru.bytes

    def __len__(self) -> int:
        return len(self._lru)

    def __contains__(self, key: str) -> bool:
        return key in self._lru

    def stats(self) -> dict[str, int | bool]:
        return {**self._lru.stats(), "int8": self.int8}
