"""The in-process backend: a transformers VLM driven chunk by chunk.

Three parts, one job each: the family's prompt layout (`PromptLayout`: prefix = system prompt +
images; suffix = history + question + assistant header), the prefix engine (`PrefixEngine`: KV
prefix cache or vision tower -> reduction -> prefix prefill) and the decoder (`Decoder`: one loop
for single and batched requests, greedy or sampled, streaming tokens with their logprobs). This
module validates requests, wires the three together for `generate`, FastV, `generate_batch` and
sessions, and bills each call (`cascade.vlm.billing`).

`kernels` ("auto" | "triton" | "torch") picks the implementation of every cascade.kernels op the
runtime uses: image preprocessing (families), RMSNorm (patched into the model at construction),
VisionZip's dominant-token scoring (reduction) and int8 KV storage (kv_cache). It is decided once,
at construction, into the runtime's `ops` (`cascade.kernels.dispatch.bind`): "auto" runs Triton
on CUDA and the torch reference on CPU; "triton" on CPU needs TRITON_INTERPRET=1.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any, Literal

import torch
from pydantic import ValidationError

from ..artifacts import ImageEmbeds
from ..decoding import DEFAULT_MAX_NUM_SEQS, Completion
from ..devices import pick_device, pick_dtype
from ..errors import InputError
from ..kernels.dispatch import IMPLS, Ops, bind
from .batcher import ContinuousBatcher
from .billing import vlm_bill
from .decode import GREEDY, Decoder, Generated, OnToken, SamplingParams, share_prefix
from .encoder_cache import DEFAULT_ENCODER_CACHE_BYTES, EncoderCache
from .families import Family, FamilyRuntime, ImageLimits, load_family
from .fastv import fastv_prefill, layerwise_step
from .kv_cache import KVPrefixCache, kv_token_bytes
from .media import as_images
from .prefix import PrefixEngine, sync
from .press import KVConfig
from .prompt import History, PromptLayout
from .reduction import ReductionConfig, keep_count, reduction_names
from .result import VLMResult, peak_memory

__all__ = ["TransformersBackend"]


class TransformersBackend:
    """A loaded VLM: its family (`family`: the weightless description; `runtime`: bound to the
    weights and the kernels), prompt layout, prefix engine and decoder.

    context_window caps prompt + generated tokens (default: the model's max_position_embeddings).

    Thread-safe, and built for concurrent callers: a call's tower, reduction and prefill run
    under the backend's `lock` (the prefix engine and its caches are shared), then its decoding
    joins the model's continuous batch (`batcher`, `cascade.vlm.batcher`): the decode steps of
    every concurrent `generate` and `generate_batch` run as one batched forward of at most
    `max_num_seqs` rows, while the next caller's images go through the tower. FastV (a custom
    layer-by-layer step) and sessions (their KV cache is theirs across turns) decode on their
    own, under the lock.

    kv: the model's `KVConfig`: a KV press applied to every image block of a prefix after its
    prefill (`cascade.vlm.press`; FastV and `generate_batch`, which prefill otherwise, refuse
    one) and the dtype KV prefix cache entries are stored in.

    kernels: see the module docstring. RMSNorm modules are patched only where the choice resolves
    to Triton ("triton", or "auto" on CUDA with triton installed); otherwise the model keeps
    transformers' own RMSNorm, which the torch reference reproduces, so "torch" is exactly the
    unmodified model and pays no dispatch per call. `rmsnorm_patch` is the handle (None when
    unpatched); `.undo()` restores.
    """

    name = "transformers"

    def __init__(
        self,
        model: Any,
        family: Family,
        model_id: str,
        *,
        kv_cache: KVPrefixCache | None = None,
        context_window: int | None = None,
        kernels: Literal["auto", "triton", "torch"] = "auto",
        encoder_cache: EncoderCache | None = None,
        recompute_image_tokens: int | None = None,
        max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
        kv: KVConfig | None = None,
    ):
        if kernels not in IMPLS:
            raise InputError(f"kernels must be one of {list(IMPLS)}, got {kernels!r}")
        # Fails here, with the kernels' own message, if Triton cannot run on this device.
        ops = bind(kernels, family.lm_head_of(model).weight.device)
        self.model, self.model_id, self.family = model, model_id, family
        self.runtime: FamilyRuntime = family.bind(model, ops)
        self.processor = family.processor
        self.rmsnorm_patch = ops.patch_rmsnorm(model)
        window = int(context_window or family.text_config.max_position_embeddings)
        self.layout = PromptLayout(self.processor)
        if recompute_image_tokens is not None and recompute_image_tokens < 0:
            raise InputError(
                f"kv_recompute_image_tokens must be >= 0, got {recompute_image_tokens}"
            )
        self.kv = kv or KVConfig()
        self.engine = PrefixEngine(
            self.runtime, model_id, kv_cache, window, encoder_cache, recompute_image_tokens, self.kv
        )
        self.kv_token_bytes = kv_token_bytes(family.text_config, self.runtime.lm_head.weight.dtype)
        eos = model.generation_config.eos_token_id
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        if self.processor.tokenizer.eos_token_id is not None:
            eos.append(self.processor.tokenizer.eos_token_id)
        self.decoder = Decoder(
            self.runtime, frozenset(eos), vocab_size=family.lm_head_of(model).weight.shape[0]
        )
        if max_num_seqs < 1:
            raise InputError(f"max_num_seqs must be >= 1, got {max_num_seqs}")
        self.batcher = ContinuousBatcher(self.decoder, max_num_seqs)
        self.lock = threading.Lock()

    @classmethod
    def load(
        cls,
        model: str,
        *,
        device: str = "auto",
        dtype: Any = "auto",
        kv_cache: KVPrefixCache | None = None,
        kv_cache_bytes: int = 0,
        kv_int8: bool = False,
        attn_implementation: str | None = None,
        context_window: int | None = None,
        limits: ImageLimits | None = None,
        kernels: Literal["auto", "triton", "torch"] = "auto",
        encoder_cache_bytes: int = DEFAULT_ENCODER_CACHE_BYTES,
        encoder_cache: EncoderCache | None = None,
        kv_position_independent: bool = False,
        kv_recompute_image_tokens: int = 16,
        max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
        kv: KVConfig | dict | None = None,
        **model_kwargs: Any,
    ) -> TransformersBackend:
        """Load from a hub id or a local folder. kv_cache_bytes > 0 creates a KVPrefixCache of that
        budget (or pass a shared `kv_cache`); encoder_cache_bytes > 0 (default 256 MiB) an
        `EncoderCache` of the tower's outputs (or pass a shared `encoder_cache`; 0: off);
        kv_position_independent: also reuse an image's KV where it moved in the prompt,
        recomputing its first `kv_recompute_image_tokens` visual tokens and all text
        (`cascade.vlm.position_free`: approximate, off by default); limits: the family's image
        limits; `kernels` picks Triton or torch for the fused ops (class docstring); max_num_seqs:
        the most rows one batched decode step runs (class docstring); kv: the `KVConfig` (or its
        fields: press, keep, dtype, ...; kv_int8 is dtype "int8"). The model type and the limits
        are checked before any weight loads."""
        from transformers import AutoModelForImageTextToText

        try:
            kv = KVConfig.model_validate(kv or {})
        except ValidationError as e:
            raise InputError(
                f"kv: {e.errors()[0]['msg']} (at kv.{e.errors()[0]['loc'][0]})"
            ) from None
        if kv_int8 and kv.dtype == "int4":
            raise InputError("kv_int8: true contradicts kv.dtype: int4; set one of them")
        family = load_family(model, limits)
        if kernels not in IMPLS:
            raise InputError(f"kernels must be one of {list(IMPLS)}, got {kernels!r}")
        dev = pick_device(device)
        kwargs = dict(model_kwargs, dtype=pick_dtype(dtype, dev))
        if attn_implementation:
            kwargs["attn_implementation"] = attn_implementation
        net = AutoModelForImageTextToText.from_pretrained(model, **kwargs).to(dev).eval()
        if kv_cache is None and kv_cache_bytes > 0:
            kv_cache = KVPrefixCache(
                kv_cache_bytes,
                dtype="int8" if kv_int8 else kv.dtype,
                group_size=kv.group_size,
                residual=kv.residual,
            )
        if encoder_cache is None and encoder_cache_bytes > 0:
            encoder_cache = EncoderCache(encoder_cache_bytes)
        if kv_position_independent and kv_cache is None:
            raise InputError(
                "kv_position_independent reuses KV kept in the KV prefix cache: set "
                "kv_cache_bytes > 0 (or pass a kv_cache)"
            )
        return cls(
            net,
            family,
            str(model),
            kv_cache=kv_cache,
            context_window=context_window,
            kernels=kernels,
            encoder_cache=encoder_cache,
            recompute_image_tokens=kv_recompute_image_tokens if kv_position_independent else None,
            max_num_seqs=max_num_seqs,
            kv=kv,
        )

    @property
    def device(self) -> torch.device:
        return self.runtime.device

    @property
    def ops(self) -> Ops:
        """The kernels this model runs (decided once, at construction)."""
        return self.runtime.ops

    @property
    def kv_cache(self) -> KVPrefixCache | None:
        return self.engine.kv_cache

    @property
    def encoder_cache(self) -> EncoderCache | None:
        return self.engine.encoder_cache

    @property
    def vision_tower_calls(self) -> int:
        return self.engine.vision_tower_calls

    @property
    def vision_images_encoded(self) -> int:
        return self.engine.vision_images_encoded

    @property
    def eos_ids(self) -> frozenset[int]:
        return self.decoder.eos_ids

    def check_reduction(self, reduction: ReductionConfig | None) -> ReductionConfig:
        """The reduction to use (default: none); methods the family lacks raise InputError."""
        red = reduction or ReductionConfig()
        if not red.is_identity and not self.family.supports(red.method):
            why = (
                " (it drops merge units before the vision tower, which this family's tower "
                "cannot encode in part)"
                if red.where == "before_tower"
                else ""
            )
            raise InputError(
                f"reduction '{red.method}' is not supported for {self.family.name} "
                f"models{why}; supported: {self.family.reductions}"
            )
        return red

    def check_no_press(self, what: str) -> None:
        """InputError when the model has a KV press that `what` cannot apply."""
        if not self.kv.is_identity:
            raise InputError(
                f"this model presses its KV (kv.press: {self.kv.press}, keep {self.kv.keep}); "
                f"{what} prefills without prefix blocks, so it cannot: use `generate` (it joins "
                "the continuous batch) or load the model with kv.press: none"
            )

    def kv_bytes(self, tokens: list[int], unpressed: list[int]) -> tuple[int, int]:
        """(bytes, bytes without the press) of rows holding these many KV tokens."""
        return self.kv_token_bytes * sum(tokens), self.kv_token_bytes * sum(unpressed)

    def begin_call(self) -> float:
        """Start a call's clock (and, on CUDA, its peak-memory window)."""
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        return time.perf_counter()

    def result(self, gens: Generated | list[Generated], bill: Any) -> VLMResult:
        """A call's VLMResult from what the decoder generated (one completion, or a request's n:
        the first is the result's own text) and its bill."""
        gens = gens if isinstance(gens, list) else [gens]
        gen, mem_kind = gens[0], peak_memory(self.device)
        completions = tuple(
            Completion(g.text, g.finish, tuple(g.tokens), tuple(g.entries) if g.entries else None)
            for g in gens
        )
        return VLMResult(
            text=gen.text,
            token_ids=tuple(gen.tokens),
            model=self.model_id,
            backend=self.name,
            bill=bill,
            logprobs=tuple(gen.logprobs),
            top_logprobs=tuple(gen.top_logprobs),
            completions=completions,
            peak_memory_bytes=mem_kind[0],
            peak_memory_kind=mem_kind[1],
        )

    @staticmethod
    def check_sampling(sampling: Any, *, one: str | None = None) -> SamplingParams:
        """The call's settings (a SamplingParams or a mapping of its fields); `one` names a path
        that decodes a single completion per request, where n > 1 is refused."""
        from ..decoding import sampling_params

        sampling = sampling_params(sampling)
        if one is not None and sampling.n > 1:
            raise InputError(
                f"sampling.n = {sampling.n}: {one} decodes one completion per "
                "request; ask with n = 1"
            )
        return sampling

    # -- one request ------------------------------------------------------------------------------
    def generate(
        self,
        images: Any,
        question: str,
        *,
        max_new_tokens: int = 64,
        reduction: ReductionConfig | None = None,
        system_prompt: str | None = None,
        history: History = (),
        sampling: SamplingParams = GREEDY,
        on_token: OnToken | None = None,
    ) -> VLMResult:
        """One request; `sampling.n` > 1 decodes n completions from one prefill (the prompt's KV
        repeated along the batch, `share_prefix`), billed together."""
        t0 = self.begin_call()
        sampling = self.check_sampling(sampling)
        images = as_images(images)
        if not images:
            raise InputError("no image given: this VLM call needs at least one image")
        question = self.layout.check_question(question)
        if max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        red = self.check_reduction(reduction)
        max_new_tokens = sampling.max_tokens or max_new_tokens
        with self.lock:
            prefix_text, suffix_text = self.layout.first_turn(
                len(images), system_prompt, question, history
            )
            suffix = self.layout.tokenize(suffix_text)
            costs = [self.family.image_cost(im.width, im.height) for im in images]
            if red.question_dependent:
                self.check_no_press("fastv")
                return self._generate_fastv(
                    images, prefix_text, suffix, red, max_new_tokens, t0, costs, sampling, on_token
                )
            state, status, vision_s, prefix_s = self.engine.state(images, prefix_text, red)
            self.engine.check_context(state.length + len(suffix), max_new_tokens)
            cache = self.engine.cache_of(state)
            t = time.perf_counter()
            hidden = self.engine.prefill(cache, state.next_pos, suffix)
            seqs = self.decoder.sequences(sampling, max_new_tokens, on_token)
            hidden = share_prefix(hidden, cache, len(seqs))
        gens = self.batcher.decode(hidden, cache, [state.next_pos + len(suffix)] * len(seqs), seqs)
        sync(self.device)
        bill = vlm_bill(
            self.family,
            self.model_id,
            costs=costs,
            visual_tokens=state.visual_tokens,
            prompt_tokens=state.text_tokens + len(suffix),
            generated=gens,
            cache=status,
            reduction=red,
            t0=t0,
            vision_s=vision_s,
            prefill_s=prefix_s + min(g.t_first for g in gens) - t,
            cached_tokens=state.cached_tokens,
            encoded=state.encoded,
            images_cached=state.images_cached,
            tower=state.tower_costs,
            kv_bytes=self.kv_bytes(
                [state.kv_tokens + len(suffix) + len(g.tokens) - 1 for g in gens],
                [state.length + len(suffix) + len(g.tokens) - 1 for g in gens],
            ),
            kv=self.kv,
        )
        return self.result(gens, bill)

    def image_embeds(self, images: Any) -> list[ImageEmbeds]:
        """What the vision tower makes of each image (the encoder cache's entry, or one tower
        call), as `ImageEmbeds` that `generate` takes in the images' place and answers from
        with the same tokens: `cascade embed` writes them."""
        images = as_images(images)
        if not images:
            raise InputError("no image given to embed")
        red = self.check_reduction(None)
        with self.lock:
            items = self.engine.preprocess(images)
            enc = self.engine.encode_images(images, items, red)
        out = []
        for im, item, entry in zip(images, items, enc.images, strict=True):
            grid = item.tensors.get("image_grid_thw")
            if grid is None or len(entry.feats) != 1:
                raise InputError(
                    f"image embeddings are not supported for the {self.family.name} family"
                )
            out.append(
                ImageEmbeds.of(
                    entry.feats[0].detach().cpu(),
                    grid,
                    source=im.source,
                    media_index=im.media_index,
                )
            )
        return out

    def _generate_fastv(
        self, images, prefix_text, suffix, red, max_new_tokens, t0, costs, sampling, on_token
    ) -> VLMResult:
        fam, layers = self.runtime, self.family.shapes.llm.layers
        if not 1 <= red.fastv_layer < layers:
            raise InputError(
                f"fastv_layer must be in [1, {layers - 1}] for this {layers}-layer model, "
                f"got {red.fastv_layer}"
            )
        a = self.engine.assemble(images, prefix_text, ReductionConfig())
        self.engine.check_context(a.ids.numel() + len(suffix), max_new_tokens)
        t = time.perf_counter()
        with torch.inference_mode():
            emb = torch.cat([a.embeds, fam.embed(torch.tensor(suffix, device=self.device))])[None]
            pos = torch.cat([a.positions, fam.text_positions(a.next_pos, len(suffix))], dim=1)
            visual_index = (a.ids == fam.image_token_id).nonzero().squeeze(1)
            keep = keep_count(a.unreduced, red.keep_ratio)
            cache = self.engine.new_cache()
            hidden, _ = fastv_prefill(
                fam, emb, pos, visual_index, keep, red.fastv_layer, cache, a.extra
            )
        seqs = self.decoder.sequences(sampling, max_new_tokens, on_token)
        gens = self.decoder.run(
            share_prefix(hidden, cache, len(seqs)),
            cache,
            [a.next_pos + len(suffix)] * len(seqs),
            seqs,
            step=lambda e, p, c, m: layerwise_step(fam, e, p, c),
        )
        sync(self.device)
        bill = vlm_bill(
            self.family,
            self.model_id,
            costs=costs,
            visual_tokens=keep,
            prompt_tokens=a.ids.numel() - a.unreduced + len(suffix),
            generated=gens,
            cache="off",
            reduction=red,
            t0=t0,
            vision_s=a.vision_s,
            prefill_s=min(g.t_first for g in gens) - t,
            fastv_layer=red.fastv_layer,
            encoded=a.encoded,
            images_cached=a.images_cached,
        )
        return self.result(gens, bill)

    # -- a batch of requests ----------------------------------------------------------------------
    def generate_batch(
        self,
        requests: Sequence[tuple[Any, str]],
        *,
        max_new_tokens: int = 64,
        reduction: ReductionConfig | None = None,
        system_prompt: str | None = None,
        sampling: SamplingParams = GREEDY,
        on_token: OnToken | None = None,
    ) -> list[VLMResult]:
        """Answer several (images, question) requests together; results in request order.

        - Vision: every distinct image of the batch (by content hash) is preprocessed once and
          taken from the encoder cache or encoded, all those it lacks in one vision-tower call;
          two requests about the same image share its features. Its tower cost is billed to the
          first request that has it.
        - Prefill: each request's whole prompt (prefix, reduced visual tokens, question) is
          assembled exactly as `generate` assembles it, with its own positions (M-RoPE positions
          from `get_rope_index` on that request alone, which equals `get_rope_index` on the
          left-padded batch with its attention mask), then the prompts are left-padded into one
          [B, L] batch with an attention mask and prefilled in one forward.
        - Decode: the batch's rows join the model's continuous batch (`batcher`), one batched
          step per token with whatever else is decoding; a request stops at its own
          end-of-turn token, stop condition or `max_new_tokens`. `on_token` events carry the
          request's index. Every request has the one `sampling` (n = 1; a seed seeds each
          request's generator alike, so a seeded request draws what it draws alone).
        - The KV prefix cache is bypassed (neither read nor written; `cache` is "off"): a batch
          prefills each prompt in one chunk, which a cached prefix would split.
        - FastV (question-dependent, layer by layer) is not batched: InputError.

        Accounting is per request. Times are the batch's: vision_s is the shared tower call,
        prefill_s / ttft_s run to the batch's first token, total_s and tpot_s end when that
        request stopped. With reduction off the tokens equal those of one `generate` call per
        request (up to float rounding in batched kernels).
        """
        t0 = self.begin_call()
        sampling = self.check_sampling(sampling, one="generate_batch")
        max_new_tokens = sampling.max_tokens or max_new_tokens
        if isinstance(requests, (str, bytes)) or not isinstance(requests, Sequence):
            raise InputError("requests must be a list of (images, question) pairs")
        if not requests:
            return []
        if max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        red = self.check_reduction(reduction)
        self.check_no_press("generate_batch (one prefill per prompt, no prefix blocks)")
        if red.question_dependent:
            raise InputError(
                "fastv prunes inside the decoder per question and is not batched; call "
                "`generate` per request or use a pre-LLM method "
                f"{reduction_names('after_tower') + reduction_names('before_tower')}"
            )
        if red.sequence_dependent:
            raise InputError(
                f"'{red.method}' prunes each frame against its own request's frames; `batch` "
                "shares each image's tower output across requests: call `generate` per request"
            )
        if red.keep_regions is not None:
            raise InputError(
                "keep_regions name the images of one call; `batch` shares each image's "
                "tower output across requests: call `generate` per request instead"
            )
        with self.lock:  # the prefix engine and the tokenizer are shared
            fam = self.runtime
            parsed = []
            for i, req in enumerate(requests):
                if not isinstance(req, (tuple, list)) or len(req) != 2:
                    raise InputError(
                        f"request {i}: expected an (images, question) pair, got {req!r:.80}"
                    )
                images = as_images(req[0])
                if not images:
                    raise InputError(
                        f"request {i}: no image given; every request needs at least one"
                    )
                question = self.layout.check_question(req[1])
                prefix_text, suffix_text = self.layout.first_turn(
                    len(images), system_prompt, question
                )
                parsed.append(
                    (
                        [im.__content_hash__() for im in images],
                        images,
                        prefix_text,
                        self.layout.tokenize(suffix_text),
                    )
                )

            # Vision: each distinct image once (the encoder cache's, or all the rest in one tower
            # call).
            unique: dict[str, Any] = {}
            for hashes, images, _, _ in parsed:
                for h, im in zip(hashes, images, strict=True):
                    unique.setdefault(h, im)
            items = dict(zip(unique, self.engine.preprocess(list(unique.values())), strict=True))
            enc = self.engine.encode_images(list(unique.values()), list(items.values()), red)
            per_image = dict(zip(unique, enc.images, strict=True))
            fresh = {
                h for h, f in zip(unique, enc.fresh, strict=True) if f
            }  # the tower ran on these in this call
            vision_s = enc.vision_s

            # Per-request prompts, assembled as `generate` assembles them.
            seqs, billed = [], set()
            for hashes, images, prefix_text, suffix in parsed:
                a = self.engine.reduce(
                    fam.build_prefix(prefix_text, [items[h] for h in hashes]),
                    [f for h in hashes for f in per_image[h].feats],
                    red,
                    None
                    if not red.before_tower
                    else [u for h in hashes for u in per_image[h].units or ()],  # all have units
                )
                self.engine.check_context(a.ids.numel() + len(suffix), max_new_tokens)
                with torch.inference_mode():
                    emb = torch.cat([a.embeds, fam.embed(torch.tensor(suffix, device=self.device))])
                pos = torch.cat([a.positions, fam.text_positions(a.next_pos, len(suffix))], dim=1)
                costs = [self.family.image_cost(im.width, im.height) for im in images]
                tower = list(a.tower_costs) if a.tower_costs is not None else costs
                encoded = []
                for h, c in zip(hashes, tower, strict=False):
                    if (
                        h in fresh and h not in billed
                    ):  # a shared image's tower cost: its first request
                        billed.add(h)
                        encoded.append(c)
                cached = sum(h not in fresh for h in hashes)
                seqs.append((emb, pos, a, len(suffix), costs, encoded, cached))

            # Left-padded batch prefill (padding: zero embeddings at position 1, masked out).
            t = time.perf_counter()
            B, L = len(seqs), max(s[0].shape[0] for s in seqs)
            with torch.inference_mode():
                embeds = seqs[0][0].new_zeros(B, L, seqs[0][0].shape[-1])
                positions = torch.ones(
                    fam.position_rows, B, L, dtype=torch.long, device=self.device
                )
                mask = torch.zeros(B, L, dtype=torch.long, device=self.device)
                visual = torch.zeros(B, L, dtype=torch.bool, device=self.device)
                for b, (emb, pos, a, *_) in enumerate(seqs):
                    n = emb.shape[0]
                    embeds[b, L - n :], positions[:, b, L - n :], mask[b, L - n :] = emb, pos, 1
                    visual[b, L - n : L - n + a.ids.numel()] = a.ids == fam.image_token_id
                # the extra features of the prompts that have visual tokens (a text-only prompt has
                # none), in the batch's order, as `visual` marks their tokens
                extras = [s[2].extra for s in seqs if s[2].extra is not None]
                kw = fam.visual_kwargs(visual, torch.cat(extras)) if extras else {}
                cache = self.engine.new_cache()
                hidden = fam.forward(embeds, positions, cache, attention_mask=mask, **kw)
            next_pos = [a.next_pos + n_sfx for _, _, a, n_sfx, *_ in seqs]
            rows = [
                s
                for b in range(B)
                for s in self.decoder.sequences(sampling, max_new_tokens, on_token, request=b)
            ]
        gens = self.batcher.decode(hidden, cache, next_pos, rows, attention_mask=mask)
        sync(self.device)
        prefill_s = min(g.t_first for g in gens) - t
        results = []
        for gen, (_, _, a, n_sfx, costs, encoded, cached) in zip(gens, seqs, strict=False):
            n_vis = int((a.ids == fam.image_token_id).sum())
            bill = vlm_bill(
                self.family,
                self.model_id,
                costs=costs,
                visual_tokens=n_vis,
                prompt_tokens=a.ids.numel() - n_vis + n_sfx,
                generated=gen,
                cache="off",
                reduction=red,
                t0=t0,
                vision_s=vision_s,
                prefill_s=prefill_s,
                encoded=encoded,
                images_cached=cached,
                tower=a.tower_costs,
            )
            results.append(self.result(gen, bill))
        return results

    def session(
        self,
        images: Any,
        *,
        system_prompt: str | None = None,
        reduction: ReductionConfig | None = None,
        max_new_tokens: int = 64,
    ):
        from .session import Session

        return Session(
            self,
            images,
            system_prompt=system_prompt,
            reduction=reduction,
            max_new_tokens=max_new_tokens,
        )
