"""Position-independent image KV (opt-in, after MPIC / CacheBlend): an image's KV reused wherever
the image sits in a later prompt, not only after the same leading blocks.

When a prompt's block for image i is prefilled exactly, the KV of its visual tokens is also kept
under the image's own key (model, preprocessing, kernels, reduction, content hash, its evidence
regions), with their positions. A later prompt that shows the image after *other* content (a
reorder, a subset, a new system prompt) takes that KV instead of prefilling the image: the text
before the image and the image's first `recompute` visual tokens are prefilled (they attend to
everything before them, and the first tokens of an image carry most of its attention sink), the
rest of the image's KV is inserted as stored, keys re-rotated to the new positions, and all text
after it is prefilled as usual. The inserted tokens did not attend to the new context: the answer
drifts from a full recompute, which is why it is off by default and reported against one
(`benchmarks/reuse.py`, `tests/vlm/test_position_free.py`).

Positions: a moved image's tokens keep their layout and shift by one offset. With RoPE (1-D) and
M-RoPE (Qwen's (t, h, w) rows, every row shifted by the same offset, interleaved or not) a key
rotated at position p re-rotates to p + d by the rotation of d alone, R(p + d) = R(d) R(p), for
every frequency; the model's own rotary module gives R(d) (positions d in every row). A shift
that is not one offset for every row and token (it cannot happen for one image block) is not
reused. Only images that are one contiguous visual block are reused this way (every Qwen image;
an Idefics3 image split into tiles, whose row/column text sits between its blocks, is prefilled
as usual: a documented fallback).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..cache import content_hash
from ..errors import InputError
from .kv_cache import StoredKV

if TYPE_CHECKING:
    from .families import FamilyRuntime

__all__ = ["ImageKV", "image_kv_key", "rerotate", "shift_of"]


@dataclass
class ImageKV(StoredKV):
    """The KV of one image's (kept) visual tokens as first computed, and their positions [R, n]."""

    layers: Any
    positions: torch.Tensor
    quantized: bool = False

    @property
    def length(self) -> int:
        return int(self.positions.shape[1])

    @property
    def nbytes(self) -> int:
        return super().nbytes + self.positions.numel() * self.positions.element_size()


def image_kv_key(model_id: str, preprocessing: tuple, reduction: tuple, image_key: str) -> str:
    """Where an image's position-independent KV is kept (apart from the block chains)."""
    return content_hash(
        {
            "model": model_id,
            "preprocessing": [str(p) for p in preprocessing],
            "reduction": [str(r) for r in reduction],
            "image": image_key,
        },
        key="kv_image",
    )


def shift_of(stored: torch.Tensor, new: torch.Tensor) -> int | None:
    """The one offset d with new == stored + d in every row and token, else None."""
    if stored.shape != new.shape:
        return None
    d = (new - stored.to(new.device)).unique()
    return int(d) if d.numel() == 1 else None


def rerotate(runtime: FamilyRuntime, keys: list[torch.Tensor], shift: int) -> list[torch.Tensor]:
    """Keys [1, kv_heads, n, head_dim] (one per layer) rotated at positions p, re-rotated to
    p + shift (one rotation for every layer)."""
    if shift == 0 or not keys:
        return list(keys)
    rotary = runtime.text_model.rotary_emb
    scaling = float(getattr(rotary, "attention_scaling", 1.0))
    if scaling != 1.0:
        raise InputError(
            "position-independent KV needs RoPE without attention scaling "
            f"(this model's rotary scales by {scaling})"
        )
    first = keys[0]
    n, half = first.shape[2], first.shape[-1] // 2
    positions = torch.full((runtime.position_rows, n), shift, dtype=torch.long, device=first.device)
    with torch.inference_mode():
        cos, sin = runtime.rotary(first.new_zeros(1, n, 1), positions)
        cos, sin = cos.to(first.dtype).unsqueeze(1), sin.to(first.dtype).unsqueeze(1)
        return [k * cos + torch.cat([-k[..., half:], k[..., :half]], dim=-1) * sin for k in keys]
