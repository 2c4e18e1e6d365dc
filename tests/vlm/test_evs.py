"""`evs` (vLLM's video_pruning_rate): merge units that repeat the previous frame's are dropped
before the vision tower; checked on the tiny random-weight Qwen2-VL (`cascade.vlm.tiny`)."""

import numpy as np
import pytest
import torch

from cascade.artifacts import Image
from cascade.errors import InputError
from cascade.vlm import VLM, ReductionConfig
from cascade.vlm.reduction import keep_count
from cascade.vlm.reduction.evs import evs_select

SIDE = 112  # 4 x 4 merge units of 28 px


def _frames(n: int = 4) -> list[Image]:
    """A still background with a bright block moving one merge unit right per frame."""
    rng = np.random.default_rng(0)
    still = rng.integers(0, 255, (SIDE, SIDE, 3), dtype=np.uint8)
    out = []
    for i in range(n):
        px = still.copy()
        px[28:56, 28 * i : 28 * i + 28] = 255
        out.append(Image(px))
    return out


@pytest.fixture(scope="module")
def qwen(tiny_path):
    torch.set_num_threads(1)
    return VLM.load(
        str(tiny_path), device="cpu", attn_implementation="eager", encoder_cache_bytes=0
    )


def _assembled(vlm, images, red):
    b = vlm.backend
    prefix, _ = b.layout.first_turn(len(images), None, "What changes?")
    return b.engine.assemble(images, prefix, red)


def test_select_keeps_the_first_frame_and_the_units_that_changed():
    a = torch.zeros(16, 8)
    b = a.clone()
    b[5] = 1.0  # one unit changed
    c = b.clone()
    c[[9, 10]] = 2.0
    kept = evs_select([a, b, c], [(1, 4, 4)] * 3, 0.5)
    assert kept[0].tolist() == list(range(16))  # no frame before it: whole
    assert 5 in kept[1].tolist() and {9, 10} <= set(kept[2].tolist())
    assert sum(k.numel() for k in kept) == keep_count(48, 0.5)


def test_a_frame_of_another_size_starts_a_shot_and_each_frame_keeps_a_unit():
    a, b, c = torch.zeros(16, 8), torch.zeros(16, 8), torch.zeros(4, 8)
    kept = evs_select([a, b, c], [(1, 4, 4), (1, 4, 4), (1, 2, 2)], 0.1)
    assert kept[0].numel() == 16 and kept[2].numel() == 4  # new shots, kept whole
    assert kept[1].numel() == 1  # nothing changed: its one most changed unit stays


def _logits(vlm, images, red, question="What changes?"):
    b = vlm.backend
    prefix, suffix = b.layout.first_turn(len(images), None, question)
    state, *_ = b.engine.compute(images, prefix, red)
    hidden = b.engine.prefill(b.engine.cache_of(state), state.next_pos, b.layout.tokenize(suffix))
    with torch.inference_mode():
        return b.runtime.lm_head(hidden[0, -1]), state


def test_rate_0_is_the_unreduced_model_on_logits(qwen):
    frames = _frames()
    ref, ref_state = _logits(qwen, frames, ReductionConfig())
    same, state = _logits(qwen, frames, ReductionConfig("evs", 1.0))
    assert torch.equal(ref, same) and state.visual_tokens == ref_state.visual_tokens
    pruned, _ = _logits(qwen, frames, ReductionConfig("evs", 0.5))
    assert not torch.equal(ref, pruned)  # the check can fail: pruning changes the logits


def test_rate_half_halves_the_visual_tokens_at_their_own_positions(qwen):
    frames = _frames()
    full = _assembled(qwen, frames, ReductionConfig())
    half = _assembled(qwen, frames, ReductionConfig("evs", 0.5))
    image_id = qwen.backend.runtime.image_token_id
    n_full = int((full.ids == image_id).sum())
    assert half.unreduced == n_full
    assert int((half.ids == image_id).sum()) == keep_count(n_full, 0.5)
    # each survivor sits where it sat unpruned: its (t, h, w) positions are a subset, in order
    where = {tuple(p): i for i, p in enumerate(full.positions.T.tolist())}
    at = [where[tuple(p)] for p in half.positions.T.tolist()]
    assert at == sorted(at) and len(set(at)) == len(at)
    assert torch.equal(full.ids[at], half.ids)
    r = qwen.generate(
        frames, "What changes?", max_new_tokens=1, reduction=ReductionConfig("evs", 0.5)
    )
    assert r.bill.visual_tokens == keep_count(r.bill.unreduced_visual_tokens, 0.5)


def test_batch_and_keep_regions_are_refused(qwen):
    with pytest.raises(InputError, match="its own request.s frames"):
        qwen.generate_batch([(_frames(2), "What?")], reduction=ReductionConfig("evs", 0.5))
    with pytest.raises(InputError, match="by evidence"):
        ReductionConfig("evs", 0.5, keep_regions=(None,))
