"""Encode, prefill and decode apart: the state each role hands the next, in process.

One declared model, three roles, each a `TransformersBackend` loaded from the same checkpoint
(on Ray, each its own deployment):

- **encode**: the vision tower alone. `TransformersBackend.image_embeds` turns images into
  `ImageEmbeds` (the tower's output and its grid), which the other roles take in the images'
  place; the encoder cache keeps answering by content hash.
- **prefill**: `prefill` computes a request's question-free prefix (system prompt + images, block
  by block) into its KV prefix cache and returns a `Shipment`: the prefix's chain keys and the
  blocks the decode side said it lacks, as the cache stores them. A pressed or int4 block is
  shipped pressed or int4: what is pressed is what is shipped (docs/kv.md).
- **decode**: `receive` stores a shipment's blocks in the decode backend's own prefix cache; the
  request then runs there as usual and finds every block of its prefix cached (a "hit": no tower,
  no prefix prefill), prefills only its question's few tokens and decodes.

The question stays on the decode side on purpose: the prefix (the images) is the long prefill that
stalls decoding streams, the question is tens of tokens, and a prefix shipped without it is
reusable by every later question on those images (the block cache's keys never hold the question).
Because a block holds exactly the bits a cold run computes, the decode side answers with the
tokens of a colocated run (tests/vlm/test_disagg.py).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from .kv_cache import KVBlock, KVPrefixCache
from .media import as_images
from .prompt import History
from .reduction import ReductionConfig

if TYPE_CHECKING:
    from .transformers_backend import TransformersBackend

__all__ = ["Shipment", "prefix_keys", "lacking", "prefill", "receive"]


@dataclass(frozen=True)
class Shipment:
    """What a prefill role sends a decode role for one request.

    keys: the prefix's block keys, in chain order (the decode side's look-up).
    blocks: the blocks the receiver lacked, by key, as the sender's cache stores them.
    kv_dtype: how they are stored ("auto", "int8", "int4"): the receiver must store the same.
    nbytes: the bytes that travel (the blocks' own `nbytes`: codes, scales, ids).
    vision_s, prefill_s: the sender's tower and prefix-prefill seconds (0 on a cache hit).
    wall_s: the sender's seconds from the call to the shipment (its lock wait included).
    """

    keys: tuple[str, ...]
    blocks: dict[str, KVBlock]
    kv_dtype: str
    nbytes: int
    vision_s: float
    prefill_s: float
    wall_s: float


def _cache(backend: TransformersBackend, role: str) -> KVPrefixCache:
    cache = backend.kv_cache
    if cache is None:
        raise InputError(
            f"the {role} role needs a KV prefix cache (load the model with kv_cache_bytes > 0): "
            "the blocks travel through it"
        )
    return cache


def _prefix(
    backend: TransformersBackend,
    images: Any,
    question: str,
    reduction: ReductionConfig | None,
    system_prompt: str | None,
    history: History,
) -> tuple[list, str, ReductionConfig]:
    images = as_images(images)
    if not images:
        raise InputError("no image given: a disaggregated request ships an image prefix")
    red = backend.check_reduction(reduction)
    if red.question_dependent:
        raise InputError(
            "a question-dependent reduction (FastV) prunes inside the decoder per question: its "
            "prefix cannot be prefilled apart from the question; use a before-prefill reduction"
        )
    backend.layout.check_question(question)
    prefix_text, _ = backend.layout.first_turn(len(images), system_prompt, question, history)
    return images, prefix_text, red


def prefix_keys(
    backend: TransformersBackend,
    images: Any,
    question: str,
    *,
    reduction: ReductionConfig | None = None,
    system_prompt: str | None = None,
    history: History = (),
) -> list[str]:
    """The block keys of this request's prefix on `backend` (the same on every role of one
    model, kernels and press)."""
    images, prefix_text, red = _prefix(backend, images, question, reduction, system_prompt, history)
    return backend.engine.block_keys(images, prefix_text, red)


def lacking(backend: TransformersBackend, keys: list[str]) -> list[str]:
    """The keys of `keys` whose blocks `backend`'s prefix cache does not hold (what a decode
    replica asks the prefill replica for)."""
    cache = _cache(backend, "decode")
    return [k for k in keys if k not in cache]


def prefill(
    backend: TransformersBackend,
    images: Any,
    question: str,
    *,
    lacks: Collection[str] | None = None,
    reduction: ReductionConfig | None = None,
    system_prompt: str | None = None,
    history: History = (),
) -> Shipment:
    """Prefill the request's prefix on `backend` (the prefill role: its cache's blocks reused,
    the rest computed and stored) and ship the blocks in `lacks` (default: all of them)."""
    t0 = time.perf_counter()
    images, prefix_text, red = _prefix(backend, images, question, reduction, system_prompt, history)
    cache = _cache(backend, "prefill")
    with backend.lock:
        state, _, vision_s, prefill_s = backend.engine.state(images, prefix_text, red)
        keys = backend.engine.block_keys(images, prefix_text, red)
        wanted = keys if lacks is None else [k for k in keys if k in lacks]
        blocks = {k: cache.peek(k) for k in wanted}
    missing = [k for k, b in blocks.items() if b is None]
    if missing:
        raise InputError(
            f"{len(missing)} of the prefix's {len(keys)} blocks are not in the prefill "
            f"replica's KV cache (a block larger than its {cache.max_bytes} bytes, or reused "
            "at a moved position): raise kv_cache_bytes or turn position-independent KV off"
        )
    return Shipment(
        keys=tuple(keys),
        blocks=blocks,
        kv_dtype=cache.dtype,
        nbytes=sum(b.nbytes for b in blocks.values()),
        vision_s=vision_s,
        prefill_s=prefill_s,
        wall_s=time.perf_counter() - t0,
    )


def receive(backend: TransformersBackend, shipment: Shipment) -> float:
    """Store a shipment's blocks in `backend`'s prefix cache (the decode role); returns the
    seconds it took. The request that follows finds its whole prefix cached."""
    cache = _cache(backend, "decode")
    if shipment.kv_dtype != cache.dtype:
        raise InputError(
            f"the prefill role stores KV as {shipment.kv_dtype!r}, this decode role as "
            f"{cache.dtype!r}: declare one kv.dtype for every role of the model"
        )
    t = time.perf_counter()
    for key in shipment.keys:  # chain order: a prefix's leading blocks first
        block = shipment.blocks.get(key)
        if block is not None and not cache.put(key, block):
            raise InputError(
                f"a shipped block of {block.nbytes} bytes is larger than the decode replica's "
                f"KV cache ({cache.max_bytes} bytes): raise kv_cache_bytes"
            )
    return time.perf_counter() - t
