"""A prefix cut into blocks for the KV prefix cache (`kv_cache`): where the blocks are, their keys,
and a prefix put back together from cached blocks.

Block i (one per image) is the prefix text before image i and the image's tokens (up to the end of
its last visual block); the last block is the text after the last image (it may be empty). The keys
are known before any image is preprocessed: the prefix text split at the image placeholders, each
piece with its image's key, chained (`KVPrefixCache.chain`). Because the chain holds everything
before a block, a block's tokens are those of the prompt that stored it wherever the tokenizer
splits at the placeholders (special tokens in every shipped family); `matching` checks the token
ids anyway and reuses nothing past a block that differs.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import torch

from ..cache import content_hash
from ..errors import InputError
from .kv_cache import KVBlock, KVPrefixCache, PrefixState
from .reduction import ReductionConfig

if TYPE_CHECKING:
    from ..kernels.dispatch import Ops
    from .families import ImageInputs, PrefixInputs

__all__ = ["block_keys", "image_keys", "block_bounds", "matching", "joined_layers", "joined_state"]


def block_keys(
    model_id: str,
    preprocessing: tuple,
    placeholder: str,
    images: list,
    prefix_text: str,
    red: ReductionConfig,
) -> list[str]:
    """The chain keys of a prefix's blocks (len(images) + 1 of them). An image's key is its
    content hash and, for a before-tower reduction, its own evidence regions; the rest of the
    reduction is in the chain's root."""
    pieces = prefix_text.split(placeholder)
    if len(pieces) != len(images) + 1:
        raise InputError(f"{len(pieces) - 1} image placeholders for {len(images)} images")
    root = dataclasses.replace(red, keep_regions=None).cache_key()
    blocks = list(zip(pieces, image_keys(images, red), strict=False))
    return KVPrefixCache.chain(model_id, preprocessing, root, blocks + [(pieces[-1], None)])


def image_keys(images: list, red: ReductionConfig) -> list[str]:
    """Each image's part of a key: its content hash and its evidence regions (a before-tower
    reduction's; the rest of the reduction is in the root of every key). Under `evs` an image's
    kept units depend on every frame of its call, so its key names the whole sequence."""
    hashes = [im.__content_hash__() for im in images]
    if red.sequence_dependent:
        seq = content_hash(hashes, key="evs")
        return [f"{h}|evs:{seq}:{i}" for i, h in enumerate(hashes)]
    regions = red.keep_regions or (None,) * len(images)
    return [f"{h}|{regions[i]}" for i, h in enumerate(hashes)]


def block_bounds(
    pre: PrefixInputs, items: list[ImageInputs]
) -> tuple[list[tuple[int, int]], list[int]]:
    """([start, end) of each block in the unreduced prefix, index of each image's first visual
    block in `pre.spans`)."""
    ends, first, k = [], [], 0
    for item in items:
        first.append(k)
        k += len(item.blocks)
        ends.append(pre.spans[k - 1][1])
    ends.append(pre.input_ids.numel())
    return list(zip([0] + ends[:-1], ends, strict=True)), first


def matching(
    blocks: list[KVBlock], pre: PrefixInputs, bounds: list[tuple[int, int]]
) -> list[KVBlock]:
    """The leading cached blocks whose token ids are this prompt's."""
    n = 0
    while n < len(blocks) and torch.equal(blocks[n].ids, pre.input_ids[slice(*bounds[n])]):
        n += 1
    return blocks[:n]


def joined_layers(blocks: list[KVBlock], ops: Ops) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer, the (k, v) of consecutive blocks in one tensor each (int8 blocks dequantized)."""
    if not blocks:
        return []
    per_block = [b.kv(ops) for b in blocks]
    return [
        (
            torch.cat([kv[i][0] for kv in per_block], dim=2),
            torch.cat([kv[i][1] for kv in per_block], dim=2),
        )
        for i in range(len(per_block[0]))
    ]


def joined_state(blocks: list[KVBlock], ops: Ops) -> PrefixState:
    """The whole prefix from its cached blocks (every image's block and the text after them)."""
    length = sum(b.length for b in blocks)
    visual = sum(b.visual_tokens for b in blocks)
    costs = [b.tower_cost for b in blocks[:-1]]
    return PrefixState(
        joined_layers(blocks, ops),
        length,
        blocks[-1].next_pos,
        visual,
        sum(b.visual_tokens_before for b in blocks),
        length - visual,
        tower_costs=tuple(costs) if costs and costs[0] is not None else None,
        cached_tokens=length,
    )
