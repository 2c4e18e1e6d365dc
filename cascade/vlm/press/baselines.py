"""Presses that look at no attention, the baselines the attention-guided ones must beat: `random`
(a seeded uniform draw per layer and head: the same block gets the same draw, so caching holds)
and `recency` (the most recent tokens, StreamingLLM's tail without its sink)."""

from __future__ import annotations

from .base import KVConfig, Press, register_press


@register_press("random")
class RandomPress(Press):
    visual_only = True

    def score(self, keys, queries, scale, layer: int, config: KVConfig):
        import torch

        g = torch.Generator().manual_seed(config.seed * 1009 + layer)
        return torch.rand(keys.shape[1], keys.shape[2], generator=g).to(keys.device)


@register_press("recency")
class RecencyPress(Press):
    visual_only = True

    def score(self, keys, queries, scale, layer: int, config: KVConfig):
        import torch

        return torch.arange(keys.shape[2], device=keys.device, dtype=torch.float32).expand(
            keys.shape[1], -1
        )
