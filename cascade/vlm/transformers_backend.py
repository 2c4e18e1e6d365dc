"""The in-process backend: a transformers VLM driven chunk by chunk.

One call runs: chat template -> split at the question into a question-free prefix (system prompt +
images) and a suffix (question + assistant header) -> prefix state from the KV prefix cache, or
vision tower -> token reduction -> prefix prefill -> suffix prefill -> greedy decoding. The prefix
is always prefilled as its own chunk, cached or not, so a cache hit computes bit-for-bit what a
miss computes (fp storage) and answers with the same tokens.

`generate_batch` answers several requests at once: each distinct image encoded once in one tower
call, left-padded prompts prefilled together, greedy decoding in lockstep; it bypasses the prefix
cache (see its docstring).

`kernels` ("auto" | "triton" | "torch") picks the implementation of every cascade.kernels op the
runtime uses: image preprocessing (families), RMSNorm (patched into the model at construction),
VisionZip's dominant-token scoring (reduction) and int8 KV storage (kv_cache). "auto" runs Triton
on CUDA and the torch reference on CPU; "triton" on CPU needs TRITON_INTERPRET=1.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Literal

import torch

from ..cost import ModelShape, decode_flops, prefill_flops
from ..errors import CascadeError, InputError
from ..kernels._dispatch import IMPLS, choose_impl
from ..kernels.rmsnorm import patch_rmsnorm
from .families import Family, PrefixInputs, family_for
from .fastv import fastv_prefill, layerwise_step
from .kv_cache import KVPrefixCache, PrefixState, cache_layers, new_dynamic_cache
from .media import as_images
from .reduction import PRE_LLM_METHODS, ReductionConfig, keep_count, reduce_tokens
from .result import VLMResult, geometric_confidence, peak_memory

__all__ = ["TransformersBackend", "resolve_device", "resolve_dtype"]

# Private-use characters: no template escapes them and no question contains them.
_Q, _A = "\ue000Q{}\ue000", "\ue000A{}\ue000"


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_dtype(dtype: Any, device: torch.device) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    try:
        return {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
                "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}[dtype]
    except KeyError:
        raise InputError(f"unknown dtype '{dtype}'; use auto, float32, bfloat16 or float16") from None


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class TransformersBackend:
    """A loaded VLM plus its family adapter, prefix cache and counters.

    vision_tower_calls counts vision-tower runs (a prefix-cache hit or a later session turn runs
    none); vision_images_encoded counts the images those runs encoded (`generate_batch` encodes
    each distinct image of a batch once). context_window caps prompt + generated tokens (default: the model's
    max_position_embeddings). Not thread-safe: callers sharing one backend across threads
    serialize `generate` (the vlm_answer stage holds a per-model lock).

    kernels: see the module docstring. RMSNorm modules are patched only where the choice resolves
    to Triton ("triton", or "auto" on CUDA with triton installed); otherwise the model keeps transformers' own RMSNorm,
    which the torch reference reproduces, so "torch" is exactly the unmodified model and pays no
    dispatch per call. `rmsnorm_patch` is the handle (None when unpatched); `.undo()` restores.
    """

    name = "transformers"

    def __init__(self, model: Any, processor: Any, model_id: str, *,
                 kv_cache: KVPrefixCache | None = None, context_window: int | None = None,
                 kernels: Literal["auto", "triton", "torch"] = "auto"):
        if kernels not in IMPLS:
            raise InputError(f"kernels must be one of {list(IMPLS)}, got {kernels!r}")
        self.model, self.processor, self.model_id = model, processor, model_id
        self.kernels = kernels
        self.family: Family = family_for(model.config.model_type)(model, processor, kernels)
        # Fails here, with the kernels' own message, if Triton cannot run on this device.
        resolved = choose_impl(kernels, torch.empty(0, device=self.device))
        self.rmsnorm_patch = patch_rmsnorm(model, impl=kernels) if resolved == "triton" else None
        self.kv_cache = kv_cache
        text = self.family.text_config
        self.context_window = int(context_window or text.max_position_embeddings)
        # Cost-model P: decoder layers + LM head. Embedding lookups are not matmuls, and the
        # vision tower is timed separately (vision_s), as in the seed's formulas.
        lm = self.family.text_model
        params = sum(p.numel() for n, p in lm.named_parameters() if not n.startswith("embed_tokens"))
        params += sum(p.numel() for p in self.family.lm_head.parameters())
        self.shape = ModelShape(params=params, layers=int(text.num_hidden_layers),
                                hidden=int(text.hidden_size))
        eos = model.generation_config.eos_token_id
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        if processor.tokenizer.eos_token_id is not None:
            eos.append(processor.tokenizer.eos_token_id)
        self.eos_ids = frozenset(eos)
        self.vision_tower_calls = 0
        self.vision_images_encoded = 0

    @classmethod
    def load(cls, model: str, *, device: str = "auto", dtype: Any = "auto",
             kv_cache: KVPrefixCache | None = None, kv_cache_bytes: int = 0, kv_int8: bool = False,
             attn_implementation: str | None = None, context_window: int | None = None,
             min_pixels: int | None = None, max_pixels: int | None = None,
             kernels: Literal["auto", "triton", "torch"] = "auto",
             **model_kwargs: Any) -> "TransformersBackend":
        """Load from a hub id or a local folder. kv_cache_bytes > 0 creates a KVPrefixCache of that
        budget (or pass a shared `kv_cache`); min/max_pixels override the image processor's
        per-image pixel budget; `kernels` picks Triton or torch for the fused ops (class
        docstring). The model type is checked before any weight loads."""
        from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

        try:
            config = AutoConfig.from_pretrained(model)
        except (OSError, ValueError) as e:
            raise InputError(f"cannot load VLM '{model}': {e}") from e
        family_for(config.model_type)
        if kernels not in IMPLS:
            raise InputError(f"kernels must be one of {list(IMPLS)}, got {kernels!r}")
        dev = resolve_device(device)
        kwargs = dict(model_kwargs, dtype=resolve_dtype(dtype, dev))
        if attn_implementation:
            kwargs["attn_implementation"] = attn_implementation
        processor = AutoProcessor.from_pretrained(model)
        net = AutoModelForImageTextToText.from_pretrained(model, **kwargs).to(dev).eval()
        if kv_cache is None and kv_cache_bytes > 0:
            kv_cache = KVPrefixCache(kv_cache_bytes, int8=kv_int8, kernels=kernels)
        backend = cls(net, processor, str(model), kv_cache=kv_cache, context_window=context_window,
                      kernels=kernels)
        if min_pixels or max_pixels:
            backend.family.set_pixel_budget(min_pixels, max_pixels)
        return backend

    @property
    def device(self) -> torch.device:
        return self.family.device

    # -- prompt text ------------------------------------------------------------------------------
    def render(self, n_images: int, system_prompt: str | None, n_turns: int) -> str:
        """The chat template with sentinel questions/answers, n_turns user turns, generation prompt."""
        msgs: list[dict] = []
        if system_prompt is not None:
            msgs.append({"role": "system", "content": [{"type": "text", "text": system_prompt}]})
        for t in range(n_turns):
            content = [{"type": "image"}] * (n_images if t == 0 else 0)
            msgs.append({"role": "user", "content": content + [{"type": "text", "text": _Q.format(t)}]})
            if t < n_turns - 1:
                msgs.append({"role": "assistant", "content": [{"type": "text", "text": _A.format(t)}]})
        return self.processor.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)

    def first_turn_texts(self, n_images: int, system_prompt: str | None, question: str) -> tuple[str, str]:
        """(prefix, suffix): prefix = everything before the question; suffix = question onward."""
        text = self.render(n_images, system_prompt, 1)
        prefix, _, rest = text.partition(_Q.format(0))
        if self.processor.image_token not in prefix and n_images:
            raise CascadeError("this chat template puts the question before the images; the "
                               "visual prefix cannot be separated from the question")
        return prefix, question + rest

    def later_turn_text(self, n_images: int, system_prompt: str | None, turn: int, question: str) -> str:
        """Text that follows answer `turn - 1` and asks `question` (turn counts from 0)."""
        text = self.render(n_images, system_prompt, turn + 1)
        after = text.split(_A.format(turn - 1), 1)[1]
        return after.replace(_Q.format(turn), question)

    def tokenize(self, text: str) -> list[int]:
        return self.processor.tokenizer(text, add_special_tokens=False)["input_ids"]

    def check_question(self, question: Any) -> str:
        if not isinstance(question, str) or not question.strip():
            raise InputError(f"the question must be a non-empty string, got {question!r}")
        for tok in (self.processor.image_token, getattr(self.processor, "video_token", None)):
            if tok and tok in question:
                raise InputError(f"the question contains the placeholder '{tok}'; pass images as "
                                 "`images`, the runtime inserts their placeholders")
        return question

    def check_reduction(self, reduction: ReductionConfig | None) -> ReductionConfig:
        """The reduction to use (default: none); methods the family lacks raise InputError."""
        red = reduction or ReductionConfig()
        supported = self.family.reductions
        if red.method not in supported and not red.is_identity:
            raise InputError(f"reduction '{red.method}' is not supported for "
                             f"{self.model.config.model_type} models; supported: {list(supported)}")
        return red

    def check_context(self, n_prompt: int, max_new_tokens: int) -> None:
        if n_prompt + max_new_tokens > self.context_window:
            raise InputError(f"prompt of {n_prompt} tokens + max_new_tokens {max_new_tokens} exceeds "
                             f"the context window of {self.context_window} tokens; use fewer or "
                             "smaller images, a lower keep_ratio, or a shorter question")

    # -- prefix -----------------------------------------------------------------------------------
    def prefix_state(self, images: list, prefix_text: str, red: ReductionConfig
                     ) -> tuple[PrefixState, str, float, float]:
        """(state, cache status, vision seconds, prefill seconds) of the question-free prefix."""
        key = None
        if self.kv_cache is not None:
            # kernels is in the key: Triton and torch may differ in the last bits, and a cache
            # shared by two backends must still give each the tokens of its own recomputation.
            pre = (*self.family.preprocessing_key(), f"kernels={self.kernels}")
            key = KVPrefixCache.key(self.model_id, pre, red.cache_key(),
                                    [im.__content_hash__() for im in images], prefix_text)
            hit = self.kv_cache.get(key)
            if hit is not None:
                return hit, "hit", 0.0, 0.0
        state, vision_s, prefill_s = self.compute_prefix(images, prefix_text, red)
        if key is not None:
            self.kv_cache.put(key, state)  # this call keeps its fp state; later hits read the entry
            return state, "miss", vision_s, prefill_s
        return state, "off", vision_s, prefill_s

    def assemble(self, images: list, prefix_text: str, red: ReductionConfig):
        """Vision tower + reduction: (ids [L'], positions [R, L'], embeds [L', D], n_before,
        next_pos, vision seconds) of the reduced prefix."""
        pre = self.family.prepare_prefix(prefix_text, [im.to_pil() for im in images])
        feats, vision_s = self.run_tower(pre.vision_inputs, len(images))
        return (*self.reduce_prefix(pre, feats, red), vision_s)

    def run_tower(self, vision_inputs: dict, n_images: int) -> tuple[list[torch.Tensor], float]:
        """One vision-tower call: (features per visual block, seconds); counts the call and the
        images it encoded."""
        t = time.perf_counter()
        with torch.inference_mode():
            feats = self.family.encode(vision_inputs)
        _sync(self.device)
        self.vision_tower_calls += 1
        self.vision_images_encoded += n_images
        return feats, time.perf_counter() - t

    def reduce_prefix(self, pre: PrefixInputs, feats: list[torch.Tensor], red: ReductionConfig):
        """Reduce each visual block and embed: (ids [L'], positions [R, L'], embeds [L', D],
        n_before, next_pos) of the reduced prefix."""
        fam = self.family
        keep = torch.ones(pre.input_ids.numel(), dtype=torch.bool, device=self.device)
        kept_feats = []
        for (s, e), grid, f in zip(pre.spans, pre.grids, feats):
            r = reduce_tokens(f, grid, red, impl=self.kernels)
            span = torch.zeros(e - s, dtype=torch.bool, device=self.device)
            span[r.index] = True
            keep[s:e] = span
            kept_feats.append(r.embeds)
        ids = pre.input_ids[keep]
        pos, next_pos = fam.reduced_positions(pre.positions, keep)
        with torch.inference_mode():
            emb = fam.embed(ids)
            vis = (ids == fam.image_token_id).unsqueeze(-1)
            emb = emb.masked_scatter(vis, torch.cat(kept_feats).to(emb.dtype))
        n_before = sum(e - s for s, e in pre.spans)
        return ids, pos, emb, n_before, next_pos

    def compute_prefix(self, images: list, prefix_text: str, red: ReductionConfig
                       ) -> tuple[PrefixState, float, float]:
        ids, pos, emb, n_before, next_pos, vision_s = self.assemble(images, prefix_text, red)
        self.check_context(ids.numel(), 0)
        t = time.perf_counter()
        cache = self.new_cache()
        with torch.inference_mode():
            self.family.forward(emb[None], pos, cache)
        _sync(self.device)
        n_vis = int((ids == self.family.image_token_id).sum())
        state = PrefixState(cache_layers(cache), ids.numel(), next_pos, n_vis, n_before,
                            ids.numel() - n_vis)
        return state, vision_s, time.perf_counter() - t

    def new_cache(self) -> Any:
        return new_dynamic_cache(self.family.text_config)

    # -- decoding ---------------------------------------------------------------------------------
    def greedy(self, hidden_last: torch.Tensor, cache: Any, next_pos: int, max_new_tokens: int,
               step=None, logprobs: list[float] | None = None) -> tuple[list[int], str, float]:
        """Greedy tokens from the last prompt hidden state; returns (tokens, finish, first-token
        time). `next_pos` is the position the first generated token takes when fed back. When a
        `logprobs` list is given, each token's log-probability (log-softmax in fp32 of the logits
        the argmax picked it from) is appended to it: `geometric_confidence(logprobs)`."""
        fam = self.family
        step = step or fam.forward
        tokens: list[int] = []
        t_first = 0.0
        with torch.inference_mode():
            h = hidden_last
            while True:
                logits = fam.lm_head(h[:, -1])
                tok = int(logits.argmax(-1))
                if not tokens:
                    t_first = time.perf_counter()
                tokens.append(tok)
                if logprobs is not None:
                    logprobs.append(float(torch.log_softmax(logits[0].float(), -1)[tok]))
                if tok in self.eos_ids or len(tokens) >= max_new_tokens:
                    break
                emb = fam.embed(torch.tensor([[tok]], device=self.device))
                h = step(emb, fam.text_positions(next_pos, 1), cache)
                next_pos += 1
        finish = "stop" if tokens[-1] in self.eos_ids else "length"
        return tokens, finish, t_first

    def prefill_suffix(self, cache: Any, next_pos: int, ids: list[int]) -> torch.Tensor:
        fam = self.family
        with torch.inference_mode():
            emb = fam.embed(torch.tensor([ids], device=self.device))
            return fam.forward(emb, fam.text_positions(next_pos, len(ids)), cache)

    # -- public -----------------------------------------------------------------------------------
    def generate(self, images: Any, question: str, *, max_new_tokens: int = 64,
                 reduction: ReductionConfig | None = None, system_prompt: str | None = None) -> VLMResult:
        t0 = time.perf_counter()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        images = as_images(images)
        if not images:
            raise InputError("no image given: this VLM call needs at least one image")
        question = self.check_question(question)
        if max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        red = self.check_reduction(reduction)
        prefix_text, suffix_text = self.first_turn_texts(len(images), system_prompt, question)
        suffix = self.tokenize(suffix_text)
        if red.question_dependent:
            return self._generate_fastv(images, prefix_text, suffix, red, max_new_tokens, t0)
        state, status, vision_s, prefix_s = self.prefix_state(images, prefix_text, red)
        self.check_context(state.length + len(suffix), max_new_tokens)
        cache = state.to_cache(self.family.text_config, impl=self.kernels)
        t = time.perf_counter()
        hidden = self.prefill_suffix(cache, state.next_pos, suffix)
        logprobs: list[float] = []
        tokens, finish, t_first = self.greedy(hidden, cache, state.next_pos + len(suffix),
                                              max_new_tokens, logprobs=logprobs)
        _sync(self.device)
        prefill_s = prefix_s + (t_first - t)
        n_prompt = state.text_tokens + len(suffix)
        computed = (self.prefill_cost(state.visual_tokens, n_prompt)
                    - (self.prefill_cost(state.visual_tokens, state.text_tokens) if status == "hit" else 0.0))
        return self.result(tokens, finish, state.visual_tokens, state.visual_tokens_before, n_prompt,
                           computed, vision_s, prefill_s, t0, t_first, status, red,
                           confidence=geometric_confidence(logprobs))

    def _generate_fastv(self, images, prefix_text, suffix, red, max_new_tokens, t0) -> VLMResult:
        layers = self.shape.layers
        if not 1 <= red.fastv_layer < layers:
            raise InputError(f"fastv_layer must be in [1, {layers - 1}] for this {layers}-layer model, "
                             f"got {red.fastv_layer}")
        ids, pos, emb, n_before, next_pos, vision_s = self.assemble(images, prefix_text, ReductionConfig())
        self.check_context(ids.numel() + len(suffix), max_new_tokens)
        sids = torch.tensor(suffix, device=self.device)
        t = time.perf_counter()
        with torch.inference_mode():
            emb = torch.cat([emb, self.family.embed(sids)])[None]
            pos = torch.cat([pos, self.family.text_positions(next_pos, len(suffix))], dim=1)
            visual_index = (ids == self.family.image_token_id).nonzero().squeeze(1)
            keep = keep_count(n_before, red.keep_ratio)
            cache = self.new_cache()
            hidden, _ = fastv_prefill(self.family, emb, pos, visual_index, keep, red.fastv_layer, cache)
        step = lambda e, p, c: layerwise_step(self.family, e, p, c)  # noqa: E731
        logprobs: list[float] = []
        tokens, finish, t_first = self.greedy(hidden, cache, next_pos + len(suffix), max_new_tokens,
                                              step, logprobs=logprobs)
        _sync(self.device)
        n_prompt = ids.numel() - n_before + len(suffix)
        k = red.fastv_layer
        full = ModelShape(self.shape.params * k // layers, k, self.shape.hidden)
        rest = ModelShape(self.shape.params - full.params, layers - k, self.shape.hidden)
        flops = prefill_flops(full, n_before, n_prompt) + prefill_flops(rest, keep, n_prompt)
        return self.result(tokens, finish, keep, n_before, n_prompt, flops, vision_s,
                           t_first - t, t0, t_first, "off", red, prefill_override=flops,
                           confidence=geometric_confidence(logprobs))

    def prefill_cost(self, n_visual: int, n_prompt: int) -> float:
        return prefill_flops(self.shape, n_visual, n_prompt)

    def result(self, tokens: list[int], finish: str, n_vis: int, n_before: int, n_prompt: int,
               computed: float, vision_s: float, prefill_s: float, t0: float, t_first: float,
               status: str, red: ReductionConfig, prefill_override: float | None = None,
               t_end: float | None = None, confidence: float | None = None) -> VLMResult:
        t_end = t_end or time.perf_counter()
        mem, kind = peak_memory(self.device)
        text = self.processor.tokenizer.decode(tokens, skip_special_tokens=True)
        n = len(tokens)
        return VLMResult(
            text=text, token_ids=tuple(tokens), finish_reason=finish, model=self.model_id,
            backend=self.name, visual_tokens=n_vis, visual_tokens_before=n_before,
            prompt_tokens=n_prompt, generated_tokens=n,
            prefill_flops=prefill_override if prefill_override is not None
            else self.prefill_cost(n_vis, n_prompt),
            baseline_prefill_flops=self.prefill_cost(n_before, n_prompt),
            computed_prefill_flops=computed,
            decode_flops=decode_flops(self.shape, n_vis, n_prompt, n),
            ttft_s=t_first - t0, tpot_s=(t_end - t_first) / (n - 1) if n > 1 else None,
            total_s=t_end - t0, vision_s=vision_s, prefill_s=prefill_s, cache=status,
            reduction={"method": red.method, "keep_ratio": red.keep_ratio},
            peak_memory_bytes=mem, peak_memory_kind=kind, confidence=confidence)

    def generate_batch(self, requests: Sequence[tuple[Any, str]], *, max_new_tokens: int = 64,
                       reduction: ReductionConfig | None = None,
                       system_prompt: str | None = None) -> list[VLMResult]:
        """Answer several (images, question) requests together; results in request order.

        - Vision: every distinct image of the batch (by content hash) is preprocessed and encoded
          once, in one vision-tower call; two requests about the same image share its features.
          `vision_images_encoded` grows by the number of distinct images, `vision_tower_calls`
          by one.
        - Prefill: each request's whole prompt (prefix, reduced visual tokens, question) is
          assembled exactly as `generate` assembles it, with its own positions (M-RoPE positions
          from `get_rope_index` on that request alone, which equals `get_rope_index` on the
          left-padded batch with its attention mask), then the prompts are left-padded into one
          [B, L] batch with an attention mask and prefilled in one forward.
        - Decode: greedy, one batched step per token; a request stops at its own end-of-turn token
          or `max_new_tokens`, the batch when all have stopped. Each request's `confidence` is
          over its own tokens only (the steps after it stopped are not counted).
        - The KV prefix cache is bypassed (neither read nor written; `cache` is "off"): a batch
          prefills each prompt in one chunk, which a cached prefix would split. Use `generate` or
          sessions to reuse a prefix across calls.
        - FastV (question-dependent, layer by layer) is not batched: InputError.

        Accounting is per request (tokens, FLOPs of its own unpadded prompt). Times are the
        batch's: vision_s is the shared tower call, prefill_s / ttft_s run to the batch's first
        token, total_s and tpot_s end when that request stopped. With reduction off the tokens
        equal those of one `generate` call per request (up to float rounding in batched kernels).
        """
        t0 = time.perf_counter()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        if isinstance(requests, (str, bytes)) or not isinstance(requests, Sequence):
            raise InputError("requests must be a list of (images, question) pairs")
        if not requests:
            return []
        if max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        red = self.check_reduction(reduction)
        if red.question_dependent:
            raise InputError("fastv prunes inside the decoder per question and is not batched; call "
                             "`generate` per request or use a pre-LLM method "
                             f"{list(PRE_LLM_METHODS)}")
        fam = self.family
        parsed = []
        for i, req in enumerate(requests):
            if not isinstance(req, (tuple, list)) or len(req) != 2:
                raise InputError(f"request {i}: expected an (images, question) pair, got {req!r:.80}")
            images = as_images(req[0])
            if not images:
                raise InputError(f"request {i}: no image given; every request needs at least one")
            question = self.check_question(req[1])
            prefix_text, suffix_text = self.first_turn_texts(len(images), system_prompt, question)
            parsed.append(([im.__content_hash__() for im in images], images, prefix_text,
                           self.tokenize(suffix_text)))

        # Vision: each distinct image once, all in one tower call.
        unique: dict[str, Any] = {}
        for hashes, images, _, _ in parsed:
            for h, im in zip(hashes, images):
                unique.setdefault(h, im)
        items = dict(zip(unique, fam.preprocess([im.to_pil() for im in unique.values()])))
        feats, vision_s = self.run_tower(fam.collate(list(items.values())), len(items))
        per_image, k = {}, 0
        for h, item in items.items():
            per_image[h] = feats[k:k + len(item.blocks)]
            k += len(item.blocks)

        # Per-request prompts, assembled as `generate` assembles them.
        seqs = []
        for hashes, _, prefix_text, suffix in parsed:
            pre = fam.build_prefix(prefix_text, [items[h] for h in hashes])
            ids, pos, emb, n_before, next_pos = self.reduce_prefix(
                pre, [f for h in hashes for f in per_image[h]], red)
            self.check_context(ids.numel() + len(suffix), max_new_tokens)
            with torch.inference_mode():
                emb = torch.cat([emb, fam.embed(torch.tensor(suffix, device=self.device))])
            pos = torch.cat([pos, fam.text_positions(next_pos, len(suffix))], dim=1)
            n_vis = int((ids == fam.image_token_id).sum())
            seqs.append((emb, pos, next_pos + len(suffix), n_vis, n_before, ids.numel() - n_vis + len(suffix)))

        # Left-padded batch prefill (padding: zero embeddings at position 1, masked out).
        t = time.perf_counter()
        B, L = len(seqs), max(e.shape[0] for e, *_ in seqs)
        tokens: list[list[int]] = [[] for _ in range(B)]
        logprobs: list[list[float]] = [[] for _ in range(B)]
        t_end: list[float | None] = [None] * B
        t_first = 0.0
        with torch.inference_mode():
            embeds = seqs[0][0].new_zeros(B, L, seqs[0][0].shape[-1])
            positions = torch.ones(fam.position_rows, B, L, dtype=torch.long, device=self.device)
            mask = torch.zeros(B, L, dtype=torch.long, device=self.device)
            for b, (emb, pos, *_) in enumerate(seqs):
                n = emb.shape[0]
                embeds[b, L - n:], positions[:, b, L - n:], mask[b, L - n:] = emb, pos, 1
            next_pos = torch.tensor([sq[2] for sq in seqs], device=self.device)
            cache = self.new_cache()
            h = fam.forward(embeds, positions, cache, attention_mask=mask)
            while True:
                logits = fam.lm_head(h[:, -1])
                chosen = logits.argmax(-1)
                chosen_lp = torch.log_softmax(logits.float(), -1).gather(-1, chosen[:, None])[:, 0].tolist()
                step = chosen.tolist()
                now = time.perf_counter()
                if not t_first:
                    t_first = now
                for b, tok in enumerate(step):
                    if t_end[b] is None:  # a stopped request's later steps are not its tokens
                        tokens[b].append(tok)
                        logprobs[b].append(chosen_lp[b])
                        if tok in self.eos_ids or len(tokens[b]) >= max_new_tokens:
                            t_end[b] = now
                if all(e is not None for e in t_end):
                    break
                # Stopped requests keep decoding their last token; their outputs are discarded.
                feed = torch.tensor([[tk[-1]] for tk in tokens], device=self.device)
                mask = torch.cat([mask, mask.new_ones(B, 1)], dim=1)
                pos = next_pos.view(1, B, 1).expand(fam.position_rows, B, 1)
                h = fam.forward(fam.embed(feed), pos, cache, attention_mask=mask)
                next_pos = next_pos + 1
        _sync(self.device)
        results = []
        for b, (_, _, _, n_vis, n_before, n_prompt) in enumerate(seqs):
            finish = "stop" if tokens[b][-1] in self.eos_ids else "length"
            flops = self.prefill_cost(n_vis, n_prompt)
            results.append(self.result(tokens[b], finish, n_vis, n_before, n_prompt, flops, vision_s,
                                       t_first - t, t0, t_first, "off", red, t_end=t_end[b],
                                       confidence=geometric_confidence(logprobs[b])))
        return results

    def session(self, images: Any, *, system_prompt: str | None = None,
                reduction: ReductionConfig | None = None, max_new_tokens: int = 64):
        from .session import Session

        return Session(self, images, system_prompt=system_prompt, reduction=reduction,
                       max_new_tokens=max_new_tokens)
