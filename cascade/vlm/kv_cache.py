"""A KV prefix cache for the visual prefix: compute the image tokens once, answer many questions.

The prefix is everything before the question in the chat template: system prompt, the user turn's
opening, and the (reduced) visual tokens. Its key is (model id, image-processor settings, reduction
config, media content hashes, prefix text) and never the question, so every question about the same
media hits. Entries live on the model's device, in a byte-bounded LRU (`cascade.cache.LRUCache`).

With `int8=True` an entry is stored quantized: keys per channel (outlier channels in keys are
stable across tokens), values per token (KIVI's split), symmetric int8 with fp scales. Against the
runtime's own KV dtype that is ~2x smaller for bf16/fp16 (a GPU's usual dtype) and ~4x for fp32
(the CPU default), less the fp32 scales. `cascade.kernels.kv_quant` does the work (Triton or its
torch reference, through the caller's `ops`: the model's kernels choice), for all layers of an
entry in one call. int8 entries give close, not identical, answers; fp entries give
exactly the tokens of recomputation.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..cache import LRUCache, content_hash
from ..kernels.dispatch import bind
from ..kernels.kv_quant import QuantizedKV, dequantize_kv, quantize_kv

if TYPE_CHECKING:
    from ..kernels.dispatch import Ops

__all__ = ["KVPrefixCache", "PrefixState", "cache_layers", "new_dynamic_cache", "quantize_kv",
           "dequantize_kv", "QuantizedKV"]


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
    """A prefilled prefix and what continuing after it needs (next text position: M-RoPE's max
    position + 1). `layers`: per-layer (k, v) of [1, kv_heads, length, head_dim], or, quantized,
    one QuantizedKV holding every layer (leading layer axis)."""

    layers: list[tuple[torch.Tensor, torch.Tensor]] | QuantizedKV
    length: int
    next_pos: int
    visual_tokens: int
    visual_tokens_before: int
    text_tokens: int
    quantized: bool = False
    tower_costs: tuple | None = None  # per image, what a reduction before the tower encoded
    # what the call that returned this state ran: the tower's cost on each image it encoded, and
    # how many images the encoder cache served (a KV hit runs neither)
    encoded: tuple = ()
    images_cached: int = 0

    def kv(self, ops: "Ops | None" = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """fp (k, v) per layer; int8 entries are dequantized (all layers in one call) with `ops`
        (default: the `auto` kernels for the entry's device)."""
        if self.quantized:
            k, v = (ops or bind("auto", self.layers.k.device)).dequantize_kv(self.layers)
            return list(zip(k.unbind(0), v.unbind(0)))
        return list(self.layers)

    def to_cache(self, config: Any, ops: "Ops | None" = None) -> Any:
        """A fresh DynamicCache holding this prefix. DynamicCache appends with torch.cat, so the
        stored tensors are never written to and the entry stays valid for the next question."""
        cache = new_dynamic_cache(config)
        for i, (k, v) in enumerate(self.kv(ops)):
            cache.update(k, v, i)
        return cache

    @property
    def nbytes(self) -> int:
        def size(x: Any) -> int:
            if isinstance(x, torch.Tensor):
                return x.element_size() * x.numel()
            if isinstance(x, QuantizedKV):
                return x.nbytes
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

    def put(self, key: str, state: PrefixState, ops: "Ops | None" = None) -> PrefixState:
        """Store `state` (quantized first when int8, with `ops`: the storing model's kernels;
        default `auto` for its device) and return the stored form."""
        if self.int8 and not state.quantized:
            ops = ops or bind("auto", state.layers[0][0].device)
            q = ops.quantize_kv([k for k, _ in state.layers], [v for _, v in state.layers])
            state = dataclasses.replace(state, layers=q, quantized=True)
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
