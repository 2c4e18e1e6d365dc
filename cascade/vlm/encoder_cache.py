"""The encoder-output cache: what the vision tower made of an image, kept so it runs once per image.

An entry is one image's tower output (its features per visual block, before any after-tower
reduction; with a reduction before the tower, the merge units it kept and what encoding them
cost). Its key is what decides that output: the model, the preprocessing (processor settings and
resize limits, `Family.preprocessing_key`), the kernels choice, the image's content hash and the
tower-side reduction of that image (method, keep ratio, its evidence regions). So the same pixels
reach the tower once per loaded model, whatever request, session, batch or pipeline shows them,
at whatever place in the prompt. After-tower reductions (pool, divprune, ...) run on the cached
output, so they share one entry.

Entries stay on the model's device in a byte-bounded LRU (`cascade.cache.LRUCache`, emptied by
`clear_all_caches` like every content cache). The default budget, `DEFAULT_ENCODER_CACHE_BYTES`
(256 MiB), holds ~85 images of 1,000 visual tokens for a 1.5k-wide fp16 LLM (Qwen2-VL-2B).
Features of an image encoded alone equal those of the same image encoded among others (the towers
here attend within an image: Qwen's `cu_seqlens`, Idefics3's tiles; tested bit for bit), so a
request served partly from the cache prefills exactly what a cold one prefills.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ..cache import LRUCache, content_hash

if TYPE_CHECKING:
    from .families import ImageCost

__all__ = ["EncoderCache", "EncodedImage", "DEFAULT_ENCODER_CACHE_BYTES"]

DEFAULT_ENCODER_CACHE_BYTES = 256 << 20


@dataclass(frozen=True)
class EncodedImage:
    """One image's tower output: features [n_b, F] per visual block; with a reduction before the
    tower, the merge units kept per block (`units`) and the tower's cost on them (`tower_cost`);
    both None when the tower encoded every patch."""

    feats: tuple[torch.Tensor, ...]
    units: tuple[torch.Tensor, ...] | None = None
    tower_cost: ImageCost | None = None

    @property
    def nbytes(self) -> int:
        tensors = list(self.feats) + list(self.units or ())
        return sum(t.element_size() * t.numel() for t in tensors)


class EncoderCache(LRUCache):
    """Byte-bounded LRU of `EncodedImage`s (an `LRUCache`: hit/miss/eviction counters, `stats`).

    max_bytes: budget for all entries together (an entry larger than the budget is not stored).
    """

    def __init__(self, max_bytes: int = DEFAULT_ENCODER_CACHE_BYTES):
        super().__init__(max_bytes, size_of=lambda e: e.nbytes)

    @staticmethod
    def key(model_id: str, preprocessing: tuple, image_hash: str, tower: tuple) -> str:
        """The key of one image's tower output. preprocessing: the family's preprocessing key and
        the kernels choice; tower: the image's part of a reduction before the tower (`("none",)`
        when the tower encodes every patch)."""
        return content_hash(
            {
                "model": model_id,
                "preprocessing": [str(p) for p in preprocessing],
                "image": image_hash,
                "tower": [str(t) for t in tower],
            },
            key="encoder",
        )
