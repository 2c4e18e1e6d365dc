"""FastV: drop the visual tokens the question ignores, inside the LLM, after layer K.

Layers 0..K-1 see every token. Then the last prompt token's attention in layer K-1 (recomputed for
that one query from the cached keys, so the model keeps SDPA/FlashAttention and never materializes
an L x L attention map) ranks the visual tokens; the lowest are removed from the hidden states and
from the rotary tables, and layers K.. run on the rest. Kept tokens keep their original positions.
The KV cache therefore holds all tokens in layers < K and only kept tokens in layers >= K, which
is why decoding runs layer by layer here too (a single-query step needs no mask). Whatever the
family's own forward adds between layers (Qwen3-VL's DeepStack features) is added here too, to
the visual tokens still kept (`FamilyRuntime.after_layer`).

The ranking depends on the question, so a FastV prefix is never stored in the KV prefix cache.
"""

from __future__ import annotations

from typing import Any

import torch

from .families.runtime import FamilyRuntime
from .kv_cache import cache_layers

__all__ = ["fastv_prefill", "layerwise_step", "last_token_attention"]


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _call_layer(
    family: FamilyRuntime,
    layer: torch.nn.Module,
    h: torch.Tensor,
    pos_emb: tuple[torch.Tensor, torch.Tensor],
    cache: Any,
    mask: Any = None,
) -> torch.Tensor:
    out = layer(
        h,
        attention_mask=mask,
        position_embeddings=pos_emb,
        use_cache=True,
        **{family.cache_kw: cache},
    )
    return out[0] if isinstance(out, tuple) else out


def last_token_attention(
    family: FamilyRuntime,
    layer_idx: int,
    h_in_last: torch.Tensor,
    cos_last: torch.Tensor,
    sin_last: torch.Tensor,
    cache: Any,
) -> torch.Tensor:
    """Head-averaged attention [L] of the last token over all keys in layer `layer_idx`.

    h_in_last: that layer's input hidden state for the last token [1, 1, D]; the keys (already
    rotated) come from the cache the layer just filled.
    """
    layer = family.text_model.layers[layer_idx]
    attn = layer.self_attn
    q = family.query_states(layer, layer.input_layernorm(h_in_last))  # [1, H, 1, hd]
    q = q * cos_last.unsqueeze(1) + _rotate_half(q) * sin_last.unsqueeze(1)
    k = cache_layers(cache)[layer_idx][0]
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    scale = getattr(attn, "scaling", attn.head_dim**-0.5)
    w = torch.softmax((q.float() @ k.float().transpose(-1, -2)) * scale, dim=-1)
    return w.mean(dim=(0, 1, 2))


def fastv_prefill(
    family: FamilyRuntime,
    embeds: torch.Tensor,
    positions: torch.Tensor,
    visual_index: torch.Tensor,
    keep: int,
    layer_k: int,
    cache: Any,
    extra: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Prefill [1, L, D] embeddings with FastV; returns (final-normed hidden of the last token
    [1, 1, D], the sequence indices kept from layer K on). visual_index: sequence index of every
    visual token, ascending; extra: their family-specific extra features (`split_features`)."""
    lm = family.text_model
    cos, sin = family.rotary(embeds, positions)
    h = embeds
    kept = torch.arange(embeds.shape[1], device=embeds.device)
    rows = visual_index  # rows of h holding visual tokens, and which visual token each is
    which = torch.arange(visual_index.numel(), device=embeds.device)
    h_in_last = h[:, -1:]
    for i, layer in enumerate(lm.layers):
        if i == layer_k and keep < visual_index.numel():
            scores = last_token_attention(family, i - 1, h_in_last, cos[:, -1:], sin[:, -1:], cache)
            top = torch.argsort(scores[visual_index], descending=True, stable=True)[:keep]
            mask = torch.ones(embeds.shape[1], dtype=torch.bool, device=embeds.device)
            mask[visual_index] = False
            mask[visual_index[top]] = True
            kept = mask.nonzero().squeeze(1)
            h, cos, sin = h[:, kept], cos[:, kept], sin[:, kept]
            which = top.sort().values
            rows = torch.searchsorted(kept, visual_index[which])
        h_in_last = h[:, -1:]
        h = _call_layer(family, layer, h, (cos, sin), cache)
        h = family.after_layer(i, h, rows, None if extra is None else extra[which])
    return lm.norm(h[:, -1:]), kept


def layerwise_step(
    family: FamilyRuntime,
    embeds: torch.Tensor,
    positions: torch.Tensor,
    cache: Any,
    attention_mask: Any = None,
) -> torch.Tensor:
    """One decode step [1, 1, D] through every layer against caches of unequal lengths."""
    lm = family.text_model
    pos_emb = family.rotary(embeds, positions)
    h = embeds
    for layer in lm.layers:
        h = _call_layer(family, layer, h, pos_emb, cache)
    return lm.norm(h)
