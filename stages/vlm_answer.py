"""Answer a question about images with a VLM: pruned visual tokens, KV prefix cache, full bill.

The model loads once per process (shared by every stage and pipeline with the same model params);
its KV prefix cache is shared with it, so a second question about the same images skips the vision
tower and the visual prefill. Every answer's usage carries the runtime's accounting (visual tokens
before/after reduction, prefill FLOPs vs the unreduced baseline, TTFT, cache hit) plus the model
shape, so `compose_answer` can bill it against the full-resolution baseline. `confidence` is the
model's geometric-mean token probability for its answer (None when the backend cannot tell); a
router can read it (`resolution_router`'s `confidence` input) to escalate an unsure thumbnail answer.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from cascade.artifacts import Answer, Evidence, Image
from cascade.stage import Stage, StageParams, stage
from cascade.trace import record

from ._shared import as_image_list, pick_device, shared_model


@stage("vlm_answer")
class VLMAnswer(Stage):
    """Answer a question about images with a vision-language model (transformers or a server)."""

    class Params(StageParams):
        model: str = Field("Qwen/Qwen2-VL-2B-Instruct", description="hub id or local folder; for "
                           "the openai backend, the served model name")
        backend: Literal["transformers", "openai"] = "transformers"
        base_url: str | None = Field(None, description="openai backend: the server's /v1 URL")
        device: str = "auto"
        dtype: str = "auto"
        max_new_tokens: int = Field(128, gt=0)
        reduction: Literal["none", "pool", "divprune", "visionzip", "dart", "fastv"] = "none"
        keep_ratio: float = Field(1.0, gt=0.0, le=1.0, description="fraction of visual tokens kept")
        fastv_layer: int = Field(2, ge=1, description="FastV: drop tokens after this layer")
        kv_cache_bytes: int = Field(2 << 30, ge=0, description="KV prefix cache budget (0: off)")
        kv_int8: bool = Field(False, description="store cached KV as int8 (~2-4x smaller)")
        min_pixels: int | None = Field(None, gt=0, description="per-image pixel floor")
        max_pixels: int | None = Field(None, gt=0, description="per-image pixel cap")
        system_prompt: str | None = None
        kernels: Literal["auto", "triton", "torch"] = Field(
            "auto", description="transformers backend: fused Triton ops ('auto': on CUDA) or their "
            "torch references")

    @dataclass(frozen=True)
    class Outputs:
        answer: Answer
        confidence: float | None

    def setup(self) -> None:
        from cascade.vlm import VLM

        p = self.params
        device = pick_device(p.device) if p.backend == "transformers" else p.device
        opts: dict = {}
        if p.backend == "openai":
            opts = {"base_url": p.base_url} if p.base_url else {}
        else:
            opts = {"kv_cache_bytes": p.kv_cache_bytes, "kv_int8": p.kv_int8,
                    "min_pixels": p.min_pixels, "max_pixels": p.max_pixels, "kernels": p.kernels}
        key = ("vlm", p.model, p.backend, p.base_url, device, p.dtype, p.kv_cache_bytes,
               p.kv_int8, p.min_pixels, p.max_pixels, p.kernels)
        self.shared = shared_model(key, lambda: VLM.load(p.model, backend=p.backend, device=device,
                                                         dtype=p.dtype, **opts))

    def run(self, images: list[Image] | Image, question: str, hint: str | None = None) -> Outputs:
        from cascade.vlm import ReductionConfig

        p = self.params
        items = as_image_list(images)
        red = ReductionConfig(p.reduction, p.keep_ratio, fastv_layer=p.fastv_layer)
        # The hint (what OCR/detection found) is question-side text: it never enters the cached
        # visual prefix.
        text = f"{hint.strip()}\n{question}" if hint and hint.strip() else question
        vlm = self.shared.model
        with self.shared.lock:
            calls = vlm.vision_tower_calls or 0
            r = vlm.generate(items, text, max_new_tokens=p.max_new_tokens, reduction=red,
                             system_prompt=p.system_prompt)
            calls = (vlm.vision_tower_calls or 0) - calls
        record(visual_tokens=r.visual_tokens, visual_tokens_before_reduction=r.visual_tokens_before,
               prompt_tokens=r.prompt_tokens, generated_tokens=r.generated_tokens,
               prefill_flops=r.prefill_flops, unreduced_prefill_flops=r.baseline_prefill_flops,
               computed_prefill_flops=r.computed_prefill_flops, decode_flops=r.decode_flops,
               kv_cache_hits=int(r.cache == "hit"), kv_cache_misses=int(r.cache == "miss"),
               vision_tower_calls=calls, ttft_s=r.ttft_s, vision_s=r.vision_s)
        usage = r.usage
        shape = getattr(vlm.backend, "shape", None) or getattr(vlm.backend, "model_shape", None)
        if shape is not None:
            usage["model_shape"] = dataclasses.asdict(shape)
        return self.Outputs(Answer(r.text, "vlm", Evidence(images=tuple(items)), usage), r.confidence)
