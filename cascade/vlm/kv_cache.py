"""The KV prefix cache: the prefilled prefix (system prompt and images) stored by blocks, so any
prompt that starts like a cached one reuses that part and prefills only the rest.

The prefix is everything before the question in the chat template: system prompt, the user turn's
opening, and the (reduced) visual tokens. It is cut into *blocks*, one per image: the text before
an image and the image's tokens, then the text after the last image. A block's key is a hash chain
(as vLLM's block hashes, SGLang's radix tree): the previous block's key, the block's text and the
image's key (content hash and its part of a before-tower reduction); the chain starts from the
model, preprocessing, kernels and reduction. So `[A, B]` then `[A, B, C]` finds the blocks of the
system text + A and of B, and prefills C's block and the text after it; the question is never in
a key, so every question about the same media reuses the whole prefix. Blocks live on the model's
device in a byte-bounded LRU (`cascade.cache.LRUCache`); a lookup refreshes a chain from its last
block to its first, so eviction takes the ends of chains before their beginnings.

With `int8=True` a block is stored quantized: keys per channel (outlier channels in keys are
stable across tokens), values per token (KIVI's split), symmetric int8 with fp scales. Against the
runtime's own KV dtype that is ~2x smaller for bf16/fp16 (a GPU's usual dtype) and ~4x for fp32
(the CPU default), less the fp32 scales. `cascade.kernels.kv_quant` does the work (Triton or its
torch reference, through the caller's `ops`: the model's kernels choice), for all layers of a
block in one call. int8 blocks give close, not identical, answers; fp blocks give exactly the
tokens of recomputation (the prefix is always prefilled block by block, so a reused block holds
the bits a cold run computes).

With `dtype="int4"` a block is stored KIVI-style in 4 bits (`cascade.kernels.kv_int4`: keys per
channel and values per token in groups of `group_size`, the block's last `residual` tokens in full
precision): ~0.28x of bf16 at group 64, scales included. A pressed block (`cascade.vlm.press`)
holds only the tokens its press kept (`kv_tokens` < `length`); it is stored, quantized or not, as
it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, cast

import torch

from ..cache import LRUCache, content_hash
from ..kernels.dispatch import bind
from ..kernels.kv_int4 import Int4KV, dequantize_kv_int4, quantize_kv_int4
from ..kernels.kv_quant import QuantizedKV, dequantize_kv, quantize_kv

if TYPE_CHECKING:
    from ..kernels.dispatch import Ops

__all__ = [
    "KVPrefixCache",
    "PrefixState",
    "KVBlock",
    "cache_layers",
    "kv_token_bytes",
    "new_dynamic_cache",
    "set_cache_layers",
    "quantize_kv",
    "dequantize_kv",
    "QuantizedKV",
]


def new_dynamic_cache(config: Any, layers: Iterable[tuple[torch.Tensor, torch.Tensor]] = ()) -> Any:
    """A transformers DynamicCache for a decoder config, holding `layers` (per layer (k, v)) if
    given. DynamicCache appends with torch.cat, so the given tensors are never written to."""
    from transformers import DynamicCache

    try:
        cache = DynamicCache(config=config)
    except TypeError:  # transformers < 4.56 has no config argument
        cache = DynamicCache()
    for i, (k, v) in enumerate(layers):
        cache.update(k, v, i)
    return cache


def cache_layers(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per-layer (keys, values) of a transformers DynamicCache (old and new layouts)."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache, strict=True))


def set_cache_layers(cache: Any, layers: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Replace every layer's (keys, values) of a transformers DynamicCache (a press shortens them;
    positions live in the rotated keys, so nothing else of the cache changes)."""
    if hasattr(cache, "layers"):
        for layer, (k, v) in zip(cache.layers, layers, strict=True):
            layer.keys, layer.values = k, v
        return
    for i, (k, v) in enumerate(layers):
        cache.key_cache[i], cache.value_cache[i] = k, v


def kv_token_bytes(text_config: Any, dtype: torch.dtype) -> int:
    """Bytes one token's keys and values take over every layer of a decoder, in `dtype`."""
    heads = getattr(text_config, "num_key_value_heads", None) or text_config.num_attention_heads
    head_dim = getattr(text_config, "head_dim", None) or (
        text_config.hidden_size // text_config.num_attention_heads
    )
    elt = torch.empty(0, dtype=dtype).element_size()
    return 2 * text_config.num_hidden_layers * heads * head_dim * elt


class StoredKV:
    """Per-layer (k, v) of [1, kv_heads, length, head_dim], or, quantized, one QuantizedKV holding
    every layer (leading layer axis): what a prefix state and a cached block hold."""

    layers: list[tuple[torch.Tensor, torch.Tensor]] | QuantizedKV | list[Int4KV]
    quantized: bool
    # every kind of entry is a dataclass (`KVPrefixCache.put` copies one with new layers)
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def kv(self, ops: Ops | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """fp (k, v) per layer; int8 entries are dequantized (all layers in one call) with `ops`
        (default: the `auto` kernels for the entry's device), int4 entries layer by layer."""
        if isinstance(self.layers, QuantizedKV):
            k, v = (ops or bind("auto", self.layers.k.device)).dequantize_kv(self.layers)
            return list(zip(k.unbind(0), v.unbind(0), strict=True))
        if self.layers and isinstance(self.layers[0], Int4KV):
            return [dequantize_kv_int4(layer) for layer in self.layers]
        return list(cast("list[tuple[torch.Tensor, torch.Tensor]]", self.layers))

    @property
    def kv_tokens(self) -> int:
        """Tokens whose KV is held (fewer than the prefix's tokens when a press dropped some)."""
        if isinstance(self.layers, QuantizedKV):
            return self.layers.k.shape[-2]
        if not self.layers:
            return 0
        first = self.layers[0]
        return first.seq_len if isinstance(first, Int4KV) else first[0].shape[2]

    @property
    def nbytes(self) -> int:
        if isinstance(self.layers, QuantizedKV):
            return self.layers.nbytes
        # an entry's layers are all of one kind: the first one says which
        if self.layers and isinstance(self.layers[0], Int4KV):
            return sum(layer.nbytes for layer in self.layers)
        fp = cast("list[tuple[torch.Tensor, torch.Tensor]]", self.layers)
        return sum(t.element_size() * t.numel() for kv in fp for t in kv)


@dataclass
class PrefixState(StoredKV):
    """A prefilled prefix and what continuing after it needs (next text position: M-RoPE's max
    position + 1), with what the call that returned it did: `cached_tokens` reused from the
    cache, the tower's cost on each image it encoded (`encoded`) and the images the encoder cache
    served (`images_cached`)."""

    layers: list[tuple[torch.Tensor, torch.Tensor]] | QuantizedKV
    length: int
    next_pos: int
    visual_tokens: int
    visual_tokens_before: int
    text_tokens: int
    quantized: bool = False
    tower_costs: tuple | None = None  # per image, what a reduction before the tower encoded
    cached_tokens: int = 0
    encoded: tuple = ()
    images_cached: int = 0

    def to_cache(self, config: Any, ops: Ops | None = None) -> Any:
        """A fresh DynamicCache holding this prefix (the stored tensors are never written to, so
        the state stays valid for the next question)."""
        return new_dynamic_cache(config, self.kv(ops))


@dataclass
class KVBlock(StoredKV):
    """One cached block of a prefix (module docstring): its KV, its token ids before reduction
    (`ids`, checked against the prompt that reuses it), which of them the reduction kept
    (`keep`), its visual tokens before and after reduction, the next text position after it
    (`next_pos`) and its image's tower cost under a before-tower reduction (None otherwise)."""

    layers: list[tuple[torch.Tensor, torch.Tensor]] | QuantizedKV
    ids: torch.Tensor
    keep: torch.Tensor
    visual_tokens: int
    visual_tokens_before: int
    next_pos: int
    tower_cost: Any = None
    quantized: bool = False

    @property
    def length(self) -> int:
        return int(self.keep.sum())

    @property
    def nbytes(self) -> int:
        return super().nbytes + self.ids.numel() * self.ids.element_size() + self.keep.numel()


class KVPrefixCache(LRUCache):
    """Byte-bounded LRU of prefix blocks (an `LRUCache`: hit/miss/eviction counters, `stats`).

    max_bytes: budget for all entries together (an entry larger than the budget is not stored).
    int8: store entries as int8 (see module docstring); the same as dtype="int8".
    dtype: "auto" (the model's own), "int8" or "int4" (KIVI, `group_size` and `residual`).
    """

    def __init__(
        self,
        max_bytes: int = 2 << 30,
        int8: bool = False,
        dtype: str = "auto",
        group_size: int = 64,
        residual: int = 32,
    ):
        super().__init__(max_bytes, size_of=lambda s: s.nbytes)
        if dtype not in ("auto", "int8", "int4"):
            raise ValueError(f"KV cache dtype must be 'auto', 'int8' or 'int4', got {dtype!r}")
        if int8 and dtype == "int4":
            raise ValueError("int8=True contradicts dtype='int4'")
        self.dtype = "int8" if int8 else dtype
        self.group_size, self.residual = group_size, residual

    @property
    def int8(self) -> bool:
        return self.dtype == "int8"

    @staticmethod
    def chain(
        model_id: str, preprocessing: tuple, reduction: tuple, blocks: list[tuple[str, str | None]]
    ) -> list[str]:
        """The keys of a prefix's blocks: blocks are (text, image key or None) in order; each key
        hashes the previous one with its block, the first one the model, preprocessing and
        reduction. Never the question."""
        key = content_hash(
            {
                "model": model_id,
                "preprocessing": [str(p) for p in preprocessing],
                "reduction": [str(r) for r in reduction],
            },
            key="kv_prefix",
        )
        keys = []
        for text, image in blocks:
            key = content_hash({"parent": key, "text": text, "image": image}, key="kv_block")
            keys.append(key)
        return keys

    def longest(self, keys: list[str]) -> list[KVBlock]:
        """The cached blocks of the longest run of `keys` from the first (a hit or miss counted
        per block looked up); the run is refreshed last block first, so its first blocks are the
        most recently used."""
        n = 0
        while n < len(keys) and keys[n] in self:
            n += 1
        found = [self.get(k) for k in reversed(keys[:n])][::-1]
        if n < len(keys):
            self.get(keys[n])  # counted as the miss it is
        return found if all(b is not None for b in found) else []

    def put(self, key: Hashable, state: StoredKV, ops: Ops | None = None) -> bool:
        """Store `state`, quantized first when int8 (with `ops`: the storing model's kernels;
        default `auto` for its device); False when it is larger than the whole budget."""
        if self.dtype == "auto" or state.quantized:
            return super().put(key, state)
        layers = cast("list[tuple[torch.Tensor, torch.Tensor]]", state.layers)  # not quantized: fp
        # an empty block (a prefix that ends with its last image) has nothing to quantize
        if not layers[0][0].shape[2]:
            return super().put(key, state)
        if self.dtype == "int8":
            ops = ops or bind("auto", layers[0][0].device)
            q: QuantizedKV | list[Int4KV] = ops.quantize_kv(
                [k for k, _ in layers], [v for _, v in layers]
            )
        else:
            q = [quantize_kv_int4(k, v, self.group_size, self.residual) for k, v in layers]
        return super().put(key, dataclasses.replace(state, layers=q, quantized=True))

    def stats(self) -> dict[str, int | bool]:
        return {**super().stats(), "int8": self.int8}
