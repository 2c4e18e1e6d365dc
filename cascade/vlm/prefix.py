"""The prefix engine: from images to a prefilled, question-free visual prefix, and its caches.

`state()` returns the prefix (system prompt + images) as a `PrefixState`, block by block
(`cascade.vlm.blocks`: one block per image, the text before it and its tokens, then the text after
the last image): the leading blocks the KV prefix cache holds are reused; the others are computed:
preprocess -> the tower's output for each image (the encoder cache's, or the tower on the images
it lacks, after a `tower` reduction's selection of merge units) -> token reduction -> embeddings ->
one prefill chunk per block, stored. The prefix is prefilled block by block whether or not a cache
is on, so a reused block holds the bits a cold run computes (fp storage) and answers with the same
tokens. Opt-in, an image's KV is also reused where it moved (`cascade.vlm.position_free`). With a
KV press (`cascade.vlm.press`), each block holding visual tokens is pressed right after its prefill
(its window's queries captured during it), so later blocks, the question and every later turn see
the pressed KV, and the cache stores (and a hit returns) the pressed block: the press is in every
key's root.
`generate`, FastV, sessions and batches are its clients; each decodes on its own
(`cascade.vlm.decode`).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import torch

from ..artifacts import ImageEmbeds
from ..bill import CacheOutcome
from ..errors import InputError
from .blocks import block_bounds, block_keys, image_keys, joined_layers, joined_state, matching
from .encoder_cache import EncodedImage, EncoderCache
from .families import FamilyRuntime, ImageCost, ImageInputs, PrefixInputs
from .kv_cache import (
    KVBlock,
    KVPrefixCache,
    PrefixState,
    cache_layers,
    new_dynamic_cache,
    set_cache_layers,
)
from .position_free import ImageKV, image_kv_key, rerotate, shift_of
from .press import KVConfig, press_block, press_method
from .press.queries import window_queries
from .reduction import Reduced, ReductionConfig, reduce_tokens
from .reduction.evs import evs_select

__all__ = ["PrefixEngine", "Assembled", "sync"]


def sync(device: torch.device) -> None:
    """Wait for queued GPU work, so wall-clock times mean what they say."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Assembled:
    """A reduced prefix ready to prefill: ids [L'], positions [R, L'], embeddings [L', D], the
    extra features of its visual tokens (family-specific, e.g. DeepStack; None for most),
    visual tokens before reduction, the next text position, the tower's seconds, the reduction's
    seconds (selection + gather + embedding) and, for a reduction before the tower, each image's
    `ImageCost` of what the tower encoded (None: the tower encoded every patch)."""

    ids: torch.Tensor
    positions: torch.Tensor
    embeds: torch.Tensor
    extra: torch.Tensor | None
    unreduced: int
    next_pos: int
    vision_s: float = 0.0
    reduce_s: float = 0.0
    tower_costs: tuple | None = None  # per image, what the tower encoded (a `tower` reduction)
    encoded: tuple[ImageCost, ...] = ()  # what the tower ran on in this call, per image it encoded
    images_cached: int = 0  # images whose tower output the encoder cache served


@dataclass
class Encoded:
    """The tower outputs of one call's images (in order), which of them the tower ran on in this
    call (`fresh`: the first of a repeated image), the tower's cost on each image it encoded
    (`encoded`), how many came from the encoder cache, and the seconds of the tower and of a
    before-tower selection."""

    images: list[EncodedImage]
    fresh: list[bool]
    encoded: tuple[ImageCost, ...]
    cached: int
    vision_s: float
    select_s: float

    def feats(self) -> list[torch.Tensor]:
        return [f for e in self.images for f in e.feats]

    def units(self) -> list[torch.Tensor] | None:
        if self.images and self.images[0].units is None:
            return None
        return [u for e in self.images for u in e.units or ()]  # all of them have units


class PrefixEngine:
    """Visual prefixes of one model. vision_tower_calls counts tower runs (a cache hit runs none);
    vision_images_encoded the images they encoded. encoder_cache: the tower outputs of images seen
    before (None: off). Not thread-safe (callers serialize)."""

    def __init__(
        self,
        runtime: FamilyRuntime,
        model_id: str,
        kv_cache: KVPrefixCache | None,
        context_window: int,
        encoder_cache: EncoderCache | None = None,
        recompute_image_tokens: int | None = None,
        kv: KVConfig | None = None,
    ):
        self.runtime, self.model_id, self.kv_cache = runtime, model_id, kv_cache
        self.kv = kv or KVConfig()  # the press applied to each image block (none by default)
        if recompute_image_tokens is not None and not self.kv.is_identity:
            raise InputError(
                "kv.press and kv_position_independent do not combine: a moved image's KV is "
                "reused unpressed; choose one"
            )
        self.encoder_cache = encoder_cache
        # position-independent image KV (`cascade.vlm.position_free`): the visual tokens of a moved
        # image recomputed at its start; None: off (only leading blocks are reused)
        self.recompute_image_tokens = recompute_image_tokens
        self.context_window = context_window
        self.vision_tower_calls = 0
        self.vision_images_encoded = 0

    @property
    def device(self) -> torch.device:
        return self.runtime.device

    @property
    def pi(self) -> bool:
        """Whether position-independent image KV is on."""
        return self.recompute_image_tokens is not None

    def check_context(self, n_prompt: int, max_new_tokens: int) -> None:
        if n_prompt + max_new_tokens > self.context_window:
            raise InputError(
                f"prompt of {n_prompt} tokens + max_new_tokens {max_new_tokens} exceeds "
                f"the context window of {self.context_window} tokens; use fewer or "
                "smaller images, a lower keep_ratio, or a shorter question"
            )

    def new_cache(self) -> Any:
        return new_dynamic_cache(self.runtime.text_config)

    def cache_of(self, state: PrefixState) -> Any:
        """A fresh DynamicCache holding a prefix (an int8 or int4 entry dequantized, int8 with
        the model's ops)."""
        return state.to_cache(self.runtime.text_config, self.runtime.ops)

    # -- the prefix -------------------------------------------------------------------------------
    def state(
        self, images: list, prefix_text: str, red: ReductionConfig
    ) -> tuple[PrefixState, CacheOutcome, float, float]:
        """(state, cache outcome, tower seconds, prefill seconds) of the question-free prefix. The
        outcome: "hit" (every block cached), "partial" (a leading run of blocks cached: the rest
        prefilled), "miss" (none), "off" (no KV cache)."""
        return self._prefix(images, prefix_text, red, self.kv_cache)

    def compute(
        self, images: list, prefix_text: str, red: ReductionConfig
    ) -> tuple[PrefixState, float, float]:
        """Tower, reduction and prefill of a prefix, never cached: (state, tower s, prefill s)."""
        state, _, vision_s, prefill_s = self._prefix(images, prefix_text, red, None)
        return state, vision_s, prefill_s

    def preprocessing_key(self) -> tuple:
        """What decides the tower's input besides the pixels. kernels is in it: Triton and torch
        may differ in the last bits, and a cache shared by two backends must still give each the
        tokens of its own recomputation."""
        return (*self.runtime.family.preprocessing_key(), f"kernels={self.runtime.ops.impl}")

    def block_keys(self, images: list, prefix_text: str, red: ReductionConfig) -> list[str]:
        """The chain keys of this prefix's blocks in the KV prefix cache (`cascade.vlm.blocks`):
        the model, its preprocessing and kernels, the reduction and the press in their root."""
        return block_keys(
            self.model_id,
            (*self.preprocessing_key(), *self.kv.cache_key()),  # the press: KV only
            self.runtime.family.processor.image_token,
            images,
            prefix_text,
            red,
        )

    def _prefix(
        self, images: list, prefix_text: str, red: ReductionConfig, store: KVPrefixCache | None
    ) -> tuple[PrefixState, CacheOutcome, float, float]:
        """The prefix, block by block (`cascade.vlm.blocks`): the leading blocks `store` holds are
        reused, the others computed (encoder cache or tower, reduction, one prefill chunk per
        block, whether or not a cache is on, so a reused block holds what a cold run computes) and
        stored."""
        fam, ops = self.runtime, self.runtime.ops
        keys = self.block_keys(images, prefix_text, red) if store is not None else []
        blocks = store.longest(keys) if store is not None else []
        if keys and len(blocks) == len(keys):
            return joined_state(blocks, ops), "hit", 0.0, 0.0
        if red.sequence_dependent:  # evs chooses over every frame: all of them or none reused
            blocks = []
        items = self.preprocess(images)
        pre = fam.build_prefix(prefix_text, items)
        bounds, first_span = block_bounds(pre, items)
        blocks = matching(blocks, pre, bounds)
        n = len(blocks)
        new_images = range(n, len(images))
        sub = (
            red
            if red.keep_regions is None
            else dataclasses.replace(
                red, keep_regions=tuple(red.keep_regions[i] for i in new_images)
            )
        )
        enc = self.encode_images(
            [images[i] for i in new_images], [items[i] for i in new_images], sub
        )
        keep = torch.ones(pre.input_ids.numel(), dtype=torch.bool, device=self.device)
        for b, (s, e) in zip(blocks, bounds, strict=False):  # the cached blocks: a prefix of them
            keep[s:e] = b.keep
        kept_feats = []
        for i, encoded in zip(new_images, enc.images, strict=False):
            for k, span in enumerate(range(first_span[i], first_span[i] + len(items[i].blocks))):
                (s, e), grid = pre.spans[span], pre.grids[span]
                r = self.reduced(
                    encoded.feats[k], grid, red, None if encoded.units is None else encoded.units[k]
                )
                keep[s:e] = False
                keep[s + r.index] = True
                kept_feats.append(r.embeds)
        ids = pre.input_ids[keep]
        positions, next_pos = fam.reduced_positions(pre.positions, keep)
        self.check_context(ids.numel(), 0)
        r0 = sum(b.length for b in blocks)
        with torch.inference_mode():
            emb = fam.embed(ids[r0:])
            vis = ids[r0:] == fam.image_token_id
            extra = None
            if kept_feats:
                main, extra = fam.split_features(torch.cat(kept_feats))
                emb = emb.masked_scatter(vis.unsqueeze(-1), main.to(emb.dtype))
        cache = new_dynamic_cache(self.runtime.text_config, joined_layers(blocks, ops))
        t = time.perf_counter()
        costs = [b.tower_cost for b in blocks] + [e.tower_cost for e in enc.images]
        image_keys = self.image_kv_keys(images, red) if store is not None and self.pi else []
        blended = 0  # tokens whose KV came from another prompt's position (position-independent)
        for j in range(n, len(bounds)):
            s, e = bounds[j]
            rs, re = int(keep[:s].sum()), int(keep[:e].sum())
            chunk = slice(rs - r0, re - r0)
            stored: ImageKV | None = None
            if store is not None and image_keys and j < len(images) and len(items[j].blocks) == 1:
                stored = store.get(image_keys[j])
            v0 = rs + int((~vis[chunk]).sum())  # the block's visual tokens close it (one block)
            shift = None if stored is None else shift_of(stored.positions, positions[:, v0:re])
            m = self.recompute_image_tokens  # not None where image_keys are (self.pi)
            if stored is not None and shift is not None and m is not None and re - v0 > m:
                # text and the image's first tokens prefilled; the rest of its KV moved here
                cut = v0 + m
                self._prefill_chunk(cache, emb, vis, extra, positions, r0, rs, cut)
                kv = stored.kv(ops)
                moved = rerotate(fam, [k[:, :, m:] for k, _ in kv], shift)
                for layer, (rotated, (_, v)) in enumerate(zip(moved, kv, strict=False)):
                    cache.update(rotated, v[:, :, m:], layer)
                blended += re - cut
                continue
            kv0 = cache.get_seq_length()  # a pressed cache holds fewer tokens than rs
            self._prefill_block(cache, emb, vis, extra, positions, r0, rs, re)
            if store is None or blended:  # a block after a moved image is not what a cold run holds
                continue
            layers = [
                (k[:, :, kv0:].clone(), v[:, :, kv0:].clone()) for k, v in cache_layers(cache)
            ]
            n_img = pre.input_ids[s:e] == fam.image_token_id
            store.put(
                keys[j],
                KVBlock(
                    layers,
                    pre.input_ids[s:e],
                    keep[s:e].clone(),
                    int((n_img & keep[s:e]).sum()),
                    int(n_img.sum()),
                    fam.reduced_positions(pre.positions[:, :e], keep[:e])[1],
                    costs[j] if j < len(costs) else None,
                ),
                ops,
            )
            if image_keys and j < len(images) and len(items[j].blocks) == 1 and re > v0:
                store.put(
                    image_keys[j],
                    ImageKV(
                        [
                            (k[:, :, v0 - rs :].clone(), v[:, :, v0 - rs :].clone())
                            for k, v in layers
                        ],
                        positions[:, v0:re].clone(),
                    ),
                    ops,
                )
        sync(self.device)
        prefill_s = time.perf_counter() - t
        n_vis = int((ids == fam.image_token_id).sum())
        state = PrefixState(
            cache_layers(cache),
            ids.numel(),
            next_pos,
            n_vis,
            sum(e - s for s, e in pre.spans),
            ids.numel() - n_vis,
            tower_costs=tuple(costs) if red.before_tower else None,
            cached_tokens=r0 + blended,
            encoded=enc.encoded,
            images_cached=enc.cached,
        )
        outcome: CacheOutcome = (
            "off" if store is None else "blended" if blended else "partial" if n else "miss"
        )
        return state, outcome, enc.vision_s, prefill_s

    def _prefill_block(
        self,
        cache: Any,
        emb: torch.Tensor,
        vis: torch.Tensor,
        extra: Any,
        positions: torch.Tensor,
        r0: int,
        start: int,
        end: int,
    ) -> None:
        """Prefill one block (`_prefill_chunk`) and, when it holds visual tokens and the model has
        a press, press what it added to `cache` (`cascade.vlm.press.press_block`)."""
        chunk = slice(start - r0, end - r0)
        if self.kv.is_identity or end <= start or not bool(vis[chunk].any()):
            self._prefill_chunk(cache, emb, vis, extra, positions, r0, start, end)
            return
        kv0 = cache.get_seq_length()
        if press_method(self.kv.press).needs_queries:
            with window_queries(self.runtime, self.kv.window) as queries:
                self._prefill_chunk(cache, emb, vis, extra, positions, r0, start, end)
        else:
            queries = None
            self._prefill_chunk(cache, emb, vis, extra, positions, r0, start, end)
        layers = cache_layers(cache)
        with torch.inference_mode():
            tail = [(k[:, :, kv0:], v[:, :, kv0:]) for k, v in layers]
            pressed = press_block(self.kv, tail, vis[chunk], queries)
            if pressed is not tail:
                set_cache_layers(
                    cache,
                    [
                        (torch.cat([k[:, :, :kv0], pk], 2), torch.cat([v[:, :, :kv0], pv], 2))
                        for (k, v), (pk, pv) in zip(layers, pressed, strict=True)
                    ],
                )

    def _prefill_chunk(
        self,
        cache: Any,
        emb: torch.Tensor,
        vis: torch.Tensor,
        extra: Any,
        positions: torch.Tensor,
        r0: int,
        start: int,
        end: int,
    ) -> None:
        """Prefill tokens [start, end) of the reduced prefix (its part from r0 on is `emb`, with
        `vis` marking visual tokens and `extra` their extra features) after what `cache` holds."""
        if end <= start:
            return
        fam, chunk = self.runtime, slice(start - r0, end - r0)
        kw = {}
        if extra is not None and bool(vis[chunk].any()):
            x0 = int(vis[: start - r0].sum())
            kw = fam.visual_kwargs(vis[chunk][None], extra[x0 : x0 + int(vis[chunk].sum())])
        with torch.inference_mode():
            fam.forward(emb[chunk][None], positions[:, start:end], cache, **kw)

    def image_kv_keys(self, images: list, red: ReductionConfig) -> list[str]:
        """Where each image's position-independent KV is kept (`cascade.vlm.position_free`)."""
        root = dataclasses.replace(red, keep_regions=None).cache_key()
        return [
            image_kv_key(self.model_id, self.preprocessing_key(), root, k)
            for k in image_keys(images, red)
        ]

    def visual_kwargs(self, a: Assembled) -> dict[str, Any]:
        """The decoder's extra inputs for a prefill chunk holding `a`'s visual tokens."""
        if a.extra is None:
            return {}
        return self.runtime.visual_kwargs((a.ids == self.runtime.image_token_id)[None], a.extra)

    def assemble(self, images: list, prefix_text: str, red: ReductionConfig) -> Assembled:
        """Preprocessing + vision tower (or the encoder cache) + reduction of a prefix."""
        items = self.preprocess(images)
        pre = self.runtime.build_prefix(prefix_text, items)
        enc = self.encode_images(images, items, red)
        t = time.perf_counter()
        a = self.reduce(pre, enc.feats(), red, enc.units())
        sync(self.device)
        a.vision_s, a.reduce_s = enc.vision_s, enc.select_s + time.perf_counter() - t
        a.encoded, a.images_cached = enc.encoded, enc.cached
        return a

    def preprocess(self, images: list) -> list[ImageInputs]:
        """Each image's `ImageInputs`: pixels through the family's preprocessing, `ImageEmbeds`
        from their grid (their embeddings checked against the model)."""
        fam = self.runtime
        pixels = [im.to_pil() for im in images if not isinstance(im, ImageEmbeds)]
        done = iter(fam.preprocess(pixels) if pixels else [])
        return [
            fam.embedded_inputs(im) if isinstance(im, ImageEmbeds) else next(done) for im in images
        ]

    def encode_images(
        self, images: list, items: list[ImageInputs], red: ReductionConfig
    ) -> Encoded:
        """The tower outputs of `images` (preprocessed: `items`): from the encoder cache, and for
        the rest from one tower call on the images it lacks (each distinct image once)."""
        fam = self.runtime
        regions = red.keep_regions or (None,) * len(images)
        tower = (red.method, float(red.keep_ratio)) if red.before_tower else ("none",)
        # evs: an image's units depend on its call's other frames (`image_keys` names them)
        ids = (
            image_keys(images, red)
            if red.sequence_dependent
            else [im.__content_hash__() for im in images]
        )
        keys = [
            EncoderCache.key(
                self.model_id,
                self.preprocessing_key(),
                ids[i],
                (*tower, regions[i]) if red.before_tower else tower,
            )
            for i in range(len(images))
        ]
        found: dict[str, EncodedImage] = {}
        cached = 0
        if self.encoder_cache is not None:
            for k in dict.fromkeys(keys):
                hit = self.encoder_cache.get(k)
                if hit is not None:
                    found[k] = hit
            cached = sum(k in found for k in keys)
        for i, im in enumerate(images):  # embeddings sent in: the tower's output, given
            if isinstance(im, ImageEmbeds):
                if red.before_tower:
                    raise InputError(
                        f"{im.source}: the '{red.method}' reduction selects patches before the "
                        "vision tower, and image embeddings come after it; send the image"
                    )
                found[keys[i]] = EncodedImage((im.embeds.to(self.device, fam.model.dtype),))
        first = {k: i for i, k in reversed(list(enumerate(keys)))}  # a key's first image
        todo = [first[k] for k in dict.fromkeys(keys) if k not in found]
        encoded: list[ImageCost] = []
        vision_s = select_s = 0.0
        if todo:
            vision_inputs = fam.collate([items[i] for i in todo])
            sub = (
                red
                if red.keep_regions is None
                else dataclasses.replace(red, keep_regions=tuple(regions[i] for i in todo))
            )
            units, select_s = (
                self.select_frames(items, todo, red)
                if red.sequence_dependent
                else self.select(vision_inputs, sub)
            )
            feats, vision_s = self.run_tower(vision_inputs, len(todo), units)
            at = 0  # the first visual block of image i in the tower's output
            for i in todo:
                n = len(items[i].blocks)
                kept = (
                    None if units is None else tuple(u.to(self.device) for u in units[at : at + n])
                )
                cost = (
                    fam.tower_cost(items[i], list(kept))
                    if kept is not None
                    else fam.family.image_cost(images[i].width, images[i].height)
                )
                entry = EncodedImage(
                    tuple(feats[at : at + n]), kept, cost if kept is not None else None
                )
                at += n
                found[keys[i]] = entry
                encoded.append(cost)
                if self.encoder_cache is not None:
                    self.encoder_cache.put(keys[i], entry)
        ran = {keys[i]: i for i in todo}
        fresh = [ran.get(k) == i for i, k in enumerate(keys)]
        return Encoded([found[k] for k in keys], fresh, tuple(encoded), cached, vision_s, select_s)

    def select(
        self, vision_inputs: dict, red: ReductionConfig
    ) -> tuple[list[torch.Tensor] | None, float]:
        """(merge units kept per visual block, seconds) of a reduction before the tower; (None, 0)
        for every other reduction."""
        if not red.before_tower:
            return None, 0.0
        t = time.perf_counter()
        with torch.inference_mode():
            units = self.runtime.tower_keep(vision_inputs, red.keep_ratio, red.keep_regions)
        sync(self.device)
        return units, time.perf_counter() - t

    def select_frames(
        self, items: list[ImageInputs], todo: list[int], red: ReductionConfig
    ) -> tuple[list[torch.Tensor], float]:
        """(merge units kept for each image in `todo`, seconds) of `evs`, chosen over every frame
        of the call (`items`, in order), one visual block per frame."""
        if any(len(item.blocks) != 1 for item in items):
            raise InputError(
                f"the '{red.method}' reduction compares frames of one visual block each; an "
                "image here has several"
            )
        t = time.perf_counter()
        with torch.inference_mode():
            units = evs_select(
                self.runtime.unit_pixels(self.runtime.collate(items)),
                [item.blocks[0] for item in items],
                red.keep_ratio,
            )
        sync(self.device)
        return [units[i] for i in todo], time.perf_counter() - t

    def run_tower(
        self, vision_inputs: dict, n_images: int, units: list[torch.Tensor] | None = None
    ) -> tuple[list[torch.Tensor], float]:
        """One vision-tower call: (features per visual block, seconds); counts the call and the
        images it encoded. units: per block the merge units to encode (`select`), None: all."""
        t = time.perf_counter()
        with torch.inference_mode():
            feats = (
                self.runtime.encode(vision_inputs)
                if units is None
                else self.runtime.encode(vision_inputs, keep=units)
            )
        sync(self.device)
        self.vision_tower_calls += 1
        self.vision_images_encoded += n_images
        return feats, time.perf_counter() - t

    def reduced(
        self,
        feats: torch.Tensor,
        grid: tuple[int, int, int],
        red: ReductionConfig,
        units: torch.Tensor | None = None,
    ) -> Reduced:
        """One visual block reduced: by an after-tower method, or (units: the merge units a
        before-tower reduction kept, whose features `feats` are) as the tower left it."""
        if units is None:
            return reduce_tokens(feats, grid, red, self.runtime.ops)
        return Reduced(feats, units.to(self.device))

    def reduce(
        self,
        pre: PrefixInputs,
        feats: list[torch.Tensor],
        red: ReductionConfig,
        units: list[torch.Tensor] | None = None,
    ) -> Assembled:
        """Reduce each visual block, drop the removed placeholders and embed the rest. units: the
        merge units a reduction before the tower kept (feats are then theirs alone)."""
        fam = self.runtime
        keep = torch.ones(pre.input_ids.numel(), dtype=torch.bool, device=self.device)
        kept_feats = []
        for i, ((s, e), grid, f) in enumerate(zip(pre.spans, pre.grids, feats, strict=False)):
            r = self.reduced(f, grid, red, None if units is None else units[i])
            span = torch.zeros(e - s, dtype=torch.bool, device=self.device)
            span[r.index] = True
            keep[s:e] = span
            kept_feats.append(r.embeds)
        ids = pre.input_ids[keep]
        pos, next_pos = fam.reduced_positions(pre.positions, keep)
        main, extra = fam.split_features(torch.cat(kept_feats))
        with torch.inference_mode():
            emb = fam.embed(ids)
            vis = (ids == fam.image_token_id).unsqueeze(-1)
            emb = emb.masked_scatter(vis, main.to(emb.dtype))
        tower_costs = None
        if units is not None:  # one visual block per image in the families that support it
            blocks = iter(units)
            tower_costs = tuple(
                fam.tower_cost(im, [next(blocks) for _ in im.blocks]) for im in pre.images
            )
        return Assembled(
            ids,
            pos,
            emb,
            extra,
            sum(e - s for s, e in pre.spans),
            next_pos,
            tower_costs=tower_costs,
        )

    def prefill(self, cache: Any, next_pos: int, ids: list[int]) -> torch.Tensor:
        """Prefill text tokens after what `cache` holds; returns their last-layer hidden states."""
        fam = self.runtime
        with torch.inference_mode():
            emb = fam.embed(torch.tensor([ids], device=self.device))
            return fam.forward(emb, fam.text_positions(next_pos, len(ids)), cache)
