"""The cost model: FLOPs of a VLM call from first principles (docs/concepts.md, "Cost model").

Only formulas live here; the numbers they take (layer counts, widths, matmul weights, how many
patches an image becomes and which patches attend to which) come from the model's family
(`cascade.vlm.families`), which reads them off the architecture.

Conventions: a matmul of an [n, k] input with a [k, m] weight costs 2·n·k·m FLOPs, so a token that
passes through W matmul weights costs 2·W. Attention costs 4·A FLOPs per (query, key) pair per
layer, A = heads × head_dim: 2·A for the score q·k and 2·A for the weighted sum of values.
Norms, activations, softmax, rotary embeddings and embedding lookups are not matmuls and are left
out (well under 1 % at these shapes).

Language model (L layers, W matmul weights in all layers together, D hidden, V vocabulary):
    prefill of n new tokens after `past` cached ones
        = 2·W·n + 4·A·L·(n·past + n(n+1)/2) + 2·D·V
      causal: new token i sees past + i keys; the LM head runs on the last token only.
    decode of g generated tokens after a context of c tokens: the first token comes from the
    prefill's logits, each later one costs a one-token step (the last token is never fed back):
        = Σ_{j=1..g-1} (2·W + 4·A·L·(c + j) + 2·D·V)

Vision tower (W_v matmul weights per patch: patch embedding and every block; M merger weights per
output token; P attention pairs summed over blocks):
        = 2·W_v·patches + 4·A_v·P + 2·M·tokens
  P is what the family's attention pattern makes it: Σ_images patches² per full-attention block
  for Qwen2-VL / Qwen3-VL, Σ_windows size² for Qwen2.5-VL's windowed blocks, per tile for
  Idefics3's SigLIP.

FastV (drops visual tokens after layer k): layers < k run on all n prompt tokens, the others on the
kept ones; decode attends to the mean context over layers.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DecoderShape",
    "EncoderShape",
    "prefill_flops",
    "decode_flops",
    "encoder_flops",
    "fastv_prefill_flops",
    "fastv_context",
    "causal_pairs",
]


@dataclass(frozen=True)
class DecoderShape:
    """A language model as the cost model sees it (read off the architecture by its family).

    layers: decoder layers; hidden: D; attention_width: A = query heads × head_dim; linear_params:
    W, the matmul weights of all decoder layers together (attention projections and MLP);
    vocab: rows of the LM head.
    """

    layers: int
    hidden: int
    attention_width: int
    linear_params: int
    vocab: int

    @property
    def params(self) -> int:
        """Matmul weights a token meets: every layer plus the LM head."""
        return self.linear_params + self.hidden * self.vocab


@dataclass(frozen=True)
class EncoderShape:
    """A vision tower: blocks and widths, and the merger that turns patches into LLM tokens.

    layers: transformer blocks; attention_width: A_v; linear_params: matmul weights every patch
    meets (patch embedding + all blocks); merger_params: matmul weights every output token meets
    (merger / connector, DeepStack mergers included); hidden: the blocks' width.
    """

    layers: int
    hidden: int
    attention_width: int
    linear_params: int
    merger_params: int


def causal_pairs(n: int, past: int = 0) -> float:
    """(query, key) pairs when n new tokens attend causally to `past` cached ones and each other."""
    return n * past + n * (n + 1) / 2


def prefill_flops(shape: DecoderShape, n: int, past: int = 0) -> float:
    """FLOPs to prefill n tokens after `past` cached ones, up to the first generated token's
    logits."""
    if n <= 0:
        return 0.0
    return (
        2.0 * shape.linear_params * n
        + 4.0 * shape.attention_width * shape.layers * causal_pairs(n, past)
        + 2.0 * shape.hidden * shape.vocab
    )


def decode_flops(shape: DecoderShape, context: float, generated: int) -> float:
    """FLOPs of the one-token steps that generate tokens 2..g after a context of `context` tokens
    (the first token's logits are the prefill's). `context` may be a mean over layers when layers
    hold caches of different lengths (FastV)."""
    steps = max(generated - 1, 0)
    keys = steps * context + steps * (steps + 1) / 2  # step j attends context + j keys
    return 2.0 * shape.params * steps + 4.0 * shape.attention_width * shape.layers * keys


def fastv_prefill_flops(shape: DecoderShape, n: int, kept: int, k: int) -> float:
    """FastV's prefill: layers 0..k-1 on all n tokens, layers k.. on the `kept` ones (layers are
    identical, so each holds linear_params / layers weights); one LM head."""
    per_layer = shape.linear_params / shape.layers
    rest = shape.layers - k
    return (
        2.0 * per_layer * (k * n + rest * kept)
        + 4.0 * shape.attention_width * (k * causal_pairs(n) + rest * causal_pairs(kept))
        + 2.0 * shape.hidden * shape.vocab
    )


def fastv_context(shape: DecoderShape, n: int, kept: int, k: int) -> float:
    """The mean context a decode step attends to after FastV (layers < k cache all n tokens)."""
    return (k * n + (shape.layers - k) * kept) / shape.layers


def encoder_flops(shape: EncoderShape, patches: int, attention_pairs: float, tokens: int) -> float:
    """FLOPs of a vision tower that encodes `patches` patches into `tokens` LLM tokens, with
    `attention_pairs` (query, key) pairs summed over its blocks."""
    return (
        2.0 * shape.linear_params * patches
        + 4.0 * shape.attention_width * attention_pairs
        + 2.0 * shape.merger_params * tokens
    )
