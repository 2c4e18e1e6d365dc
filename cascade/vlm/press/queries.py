"""The window's queries of every layer, captured while a block is prefilled.

A forward pre-hook on each decoder layer's attention module sees that layer's normed input and
its rotary tables; the last `window` rows are projected with the family's own `query_states` (its
query norm included) and rotated, exactly as the attention rotates them. Nothing else of the
forward changes: the model keeps SDPA, and the hooks are removed when the block is done.

The model's continuous batch keeps decoding on its own thread while a prefill runs (under the
backend's lock), through the same modules: a hook records only the thread that opened it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    import torch

    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


@contextmanager
def window_queries(runtime: Any, window: int) -> Iterator[list[tuple[torch.Tensor, float]]]:
    """Yields a list that, after the forward run inside the block, holds per layer (the last
    `window` tokens' rotated queries [1, q_heads, w, head_dim], the layer's softmax scale)."""
    layers = list(runtime.text_model.layers)
    found: dict[int, tuple[torch.Tensor, float]] = {}
    owner = threading.get_ident()

    def hook(i: int):
        layer = layers[i]

        def pre(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
            if threading.get_ident() != owner:  # another request's decode step
                return
            h = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
            cos, sin = kwargs["position_embeddings"]
            w = min(window, h.shape[1])
            q = runtime.query_states(layer, h[:1, -w:])
            c, s = cos[:1, -w:].unsqueeze(1), sin[:1, -w:].unsqueeze(1)
            q = q * c + _rotate_half(q) * s
            head_dim: int = module.head_dim  # type: ignore[assignment]
            scale = getattr(module, "scaling", None) or head_dim**-0.5
            found[i] = (q, float(scale))

        return pre

    handles = [
        layer.self_attn.register_forward_pre_hook(hook(i), with_kwargs=True)
        for i, layer in enumerate(layers)
    ]
    out: list[tuple[torch.Tensor, float]] = []
    try:
        yield out
    finally:
        for h in handles:
            h.remove()
    out.extend(found[i] for i in range(len(layers)) if i in found)
