"""SnapKV-style presses: the window's attention to each key, pooled, decides what stays.

The window is the block's last `window` tokens; their queries (captured during the block's
prefill, rotated at their own positions) are multiplied with the block's cached keys here, one
small [window x seq] product per head, so the model's own attention stays SDPA and no L x L map is
ever formed. Each key's score is the attention it gets summed over the window (causal: a window
query sees the keys before it), smoothed with a width-5 average pool (SnapKV's clustering: a kept
token brings its neighbours' evidence), averaged over the query heads of its KV head.

`snapkv` rates every token of the block and always keeps the window; `snapkv_visual` rates only
the visual tokens and always keeps every text token (the system prompt and template).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import KVConfig, Press, register_press

if TYPE_CHECKING:
    import torch


def window_attention_scores(
    keys: torch.Tensor, queries: torch.Tensor, scale: float
) -> torch.Tensor:
    """[kv_heads, seq]: pooled attention of the window queries [1, q_heads, w, d] to the keys
    [1, kv_heads, seq, d] (the window is the keys' last w tokens)."""
    import torch
    import torch.nn.functional as F

    _, hkv, seq, d = keys.shape
    hq, w = queries.shape[1], queries.shape[2]
    # the query heads of a KV head side by side: one [rep * w, d] x [d, seq] product per KV head,
    # the keys never repeated
    q = queries[0].float().reshape(hkv, (hq // hkv) * w, d)
    logits = (q @ keys[0].float().transpose(-1, -2) * scale).view(hq, w, seq)
    pos = torch.arange(seq, device=keys.device)
    qpos = torch.arange(seq - w, seq, device=keys.device)
    logits = logits.masked_fill(pos[None, :] > qpos[:, None], float("-inf"))
    attn = torch.softmax(logits, dim=-1).sum(dim=1)  # [hq, seq]
    pooled = F.avg_pool1d(
        attn[:, None], kernel_size=5, stride=1, padding=2, count_include_pad=False
    )
    return pooled[:, 0].view(hkv, hq // hkv, seq).mean(dim=1)


@register_press("snapkv")
class SnapKV(Press):
    needs_queries = True
    keeps_window = True

    def score(self, keys, queries, scale, layer: int, config: KVConfig):
        return window_attention_scores(keys, queries, scale)


@register_press("snapkv_visual")
class SnapKVVisual(Press):
    needs_queries = True
    visual_only = True

    def score(self, keys, queries, scale, layer: int, config: KVConfig):
        return window_attention_scores(keys, queries, scale)
