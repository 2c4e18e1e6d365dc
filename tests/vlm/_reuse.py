"""What the reuse tests (encoder cache, prefix blocks, position-independent KV) share: loading a
fresh runtime and the first answer token's logits through the runtime's own path."""

import torch

from cascade.vlm import VLM, ReductionConfig

Q = "What is in the picture?"


def load(path, **kw):
    return VLM.load(str(path), device="cpu", **kw)


def first_logits(vlm, images, question=Q, red=None):
    """The first answer token's logits through the runtime's own path (prefix, then question)."""
    b = vlm.backend
    prefix, suffix = b.layout.first_turn(len(images), None, question)
    state, *_ = b.engine.state(images, prefix, red or ReductionConfig())
    hidden = b.engine.prefill(b.engine.cache_of(state), state.next_pos, b.layout.tokenize(suffix))
    with torch.inference_mode():
        return b.runtime.lm_head(hidden[0, -1])
