"""The cost model's formulas agree with each other the way the computation they price does.

(That they agree with the FLOPs torch counts on the real architectures is
tests/vlm/test_cost_model.py.)
"""

import pytest

from cascade.cost import (
    DecoderShape,
    causal_pairs,
    decode_flops,
    fastv_context,
    fastv_prefill_flops,
    prefill_flops,
)

# Qwen2-VL-2B's language model: 28 layers, hidden 1536, 12 query heads x 128, GQA 2 KV heads,
# MLP 8960, vocabulary 151936.
QWEN2VL_2B = DecoderShape(
    layers=28,
    hidden=1536,
    attention_width=1536,
    linear_params=28 * (2 * 1536 * 1536 + 2 * 1536 * 256 + 3 * 1536 * 8960),
    vocab=151936,
)
HEAD = 2.0 * QWEN2VL_2B.hidden * QWEN2VL_2B.vocab


def test_prefill_in_chunks_costs_what_one_chunk_costs():
    """A cached prefix + the question prefilled after it is the whole prompt prefilled at once
    (causal attention: the suffix attends to the prefix, the prefix never to the suffix); only
    the LM head runs once per chunk that produces logits."""
    whole = prefill_flops(QWEN2VL_2B, 2930)
    prefix, suffix = prefill_flops(QWEN2VL_2B, 2880), prefill_flops(QWEN2VL_2B, 50, past=2880)
    assert prefix + suffix - HEAD == pytest.approx(whole, rel=1e-12)
    assert suffix < whole / 40  # what a KV-cache hit computes


def test_decode_is_a_one_token_prefill_per_step():
    context, generated = 2930, 100
    steps = sum(prefill_flops(QWEN2VL_2B, 1, past=context + j) for j in range(generated - 1))
    assert decode_flops(QWEN2VL_2B, context, generated) == pytest.approx(steps, rel=1e-12)
    assert decode_flops(QWEN2VL_2B, context, 1) == 0.0  # the first token is the prefill's


def test_causal_attention_is_half_the_square():
    n = 8192
    attention = prefill_flops(QWEN2VL_2B, n) - prefill_flops(QWEN2VL_2B, 1) * n + HEAD * (n - 1)
    noncausal = 4.0 * QWEN2VL_2B.layers * n * n * QWEN2VL_2B.attention_width
    assert attention / noncausal == pytest.approx(0.5, rel=1e-3)
    assert causal_pairs(3) == 6 and causal_pairs(2, past=3) == 2 * 3 + 3


def test_fastv_between_no_pruning_and_pruning_everywhere():
    n, kept, L = 3000, 1000, QWEN2VL_2B.layers
    assert fastv_prefill_flops(QWEN2VL_2B, n, n, 2) == pytest.approx(prefill_flops(QWEN2VL_2B, n))
    assert fastv_prefill_flops(QWEN2VL_2B, n, kept, 0) == pytest.approx(
        prefill_flops(QWEN2VL_2B, kept)
    )
    two = fastv_prefill_flops(QWEN2VL_2B, n, kept, 2)
    assert prefill_flops(QWEN2VL_2B, kept) < two < prefill_flops(QWEN2VL_2B, n)
    assert fastv_context(QWEN2VL_2B, n, kept, 2) == pytest.approx((2 * n + (L - 2) * kept) / L)


def test_prefill_dominates_a_visual_query():
    """The README's premise: with 2,880 visual and 50 prompt tokens, prefill is > 95 % of the
    tokens and of the FLOPs of a 100-token answer."""
    prefill, decode = prefill_flops(QWEN2VL_2B, 2930), decode_flops(QWEN2VL_2B, 2930, 100)
    assert 2930 / 3030 > 0.96 and prefill / (prefill + decode) > 0.9
