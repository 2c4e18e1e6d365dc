"""The cost model every trace and benchmark uses (DESIGN.md §3).

P = parameters, L = layers, D = hidden size, Nv visual, Np prompt, Ng generated tokens:
    prefill = 2*P*(Nv+Np) + 4*L*(Nv+Np)^2*D
    decode  = 2*P*Ng + 4*L*sum_{i=1..Ng}(Nv+Np+i)*D
The first term is the dense matmuls (2 FLOPs per parameter per token); the second is attention
(QK^T and AV, 2 FLOPs each per query-key pair per hidden unit, in every layer).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ModelShape:
    """The three numbers of a language model the cost model needs."""

    params: int
    layers: int
    hidden: int

    @classmethod
    def from_config(cls, config, params: int | None = None) -> "ModelShape":
        """From a transformers config (its `text_config` if it has one); `params` counted if None."""
        text = getattr(config, "text_config", None) or config
        if params is None:
            raise ValueError("ModelShape.from_config needs params= (count them with "
                             "sum(p.numel() for p in language_model.parameters()))")
        return cls(params=int(params), layers=int(text.num_hidden_layers), hidden=int(text.hidden_size))


def prefill_flops(shape: ModelShape, n_visual: int, n_prompt: int) -> float:
    """FLOPs to prefill n_visual + n_prompt tokens."""
    n = n_visual + n_prompt
    return 2.0 * shape.params * n + 4.0 * shape.layers * n * n * shape.hidden


def decode_flops(shape: ModelShape, n_visual: int, n_prompt: int, n_generated: int) -> float:
    """FLOPs to generate n_generated tokens after a prefill of n_visual + n_prompt."""
    n0 = n_visual + n_prompt
    # sum_{i=1..Ng} (n0 + i) = Ng*n0 + Ng(Ng+1)/2
    context_sum = n_generated * n0 + n_generated * (n_generated + 1) / 2
    return 2.0 * shape.params * n_generated + 4.0 * shape.layers * context_sum * shape.hidden


@dataclass(frozen=True)
class TokenBill:
    """What one VLM call cost, next to what the full-resolution baseline would have cost."""

    visual_tokens: int
    prompt_tokens: int
    generated_tokens: int
    prefill_flops: float
    decode_flops: float
    baseline_visual_tokens: int | None = None
    baseline_prefill_flops: float | None = None

    @classmethod
    def compute(cls, shape: ModelShape, visual: int, prompt: int, generated: int,
                baseline_visual: int | None = None) -> "TokenBill":
        base = None if baseline_visual is None else prefill_flops(shape, baseline_visual, prompt)
        return cls(visual, prompt, generated, prefill_flops(shape, visual, prompt),
                   decode_flops(shape, visual, prompt, generated), baseline_visual, base)

    @property
    def prefill_token_share(self) -> float:
        """Fraction of all processed tokens that are prefill tokens."""
        pre = self.visual_tokens + self.prompt_tokens
        return pre / (pre + self.generated_tokens)

    @property
    def prefill_savings(self) -> float | None:
        """Baseline prefill FLOPs divided by this call's (None without a baseline)."""
        if not self.baseline_prefill_flops:
            return None
        return self.baseline_prefill_flops / max(self.prefill_flops, 1.0)

    def to_dict(self) -> dict:
        return {**asdict(self), "prefill_token_share": self.prefill_token_share,
                "prefill_savings": self.prefill_savings}


def qwen2vl_visual_tokens(width: int, height: int, *, patch: int = 14, merge: int = 2,
                          min_pixels: int = 56 * 56, max_pixels: int = 28 * 28 * 1280) -> int:
    """Visual tokens Qwen2-VL spends on one image after its `smart_resize` (defaults = the model's).

    Each side is rounded to a multiple of patch*merge (28 px) and the area kept within
    [min_pixels, max_pixels]; every 28x28 block becomes one token after the 2x2 merger.
    """
    import math

    factor = patch * merge
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return (h // factor) * (w // factor)
