"""The `tower` reduction: whole merge units dropped before the vision blocks (Qwen2-VL, Qwen2.5-VL,
Qwen3-VL), checked against what the tower itself sees and computes."""

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from cascade.errors import InputError
from cascade.vlm import VLM, KVPrefixCache, ReductionConfig
from cascade.vlm.reduction import tower_select

QWEN = ["tiny_path", "tiny_path_25", "tiny_path_qwen3"]
TOWER = ReductionConfig("tower", 0.25)


@pytest.fixture(scope="module", params=QWEN)
def qwen(request):
    torch.set_num_threads(1)
    # no encoder cache: these tests bill what the tower runs on each call
    return VLM.load(
        str(request.getfixturevalue(request.param)),
        device="cpu",
        attn_implementation="eager",
        encoder_cache_bytes=0,
    )


def _inputs(fam, images):
    items = fam.preprocess([im.to_pil() for im in images])
    return items, fam.collate(items)


def _prefix_logits(vlm, img, red, question="What is it?"):
    b = vlm.backend
    prefix, suffix = b.layout.first_turn(1, None, question)
    state, *_ = b.engine.compute([img], prefix, red)
    hidden = b.engine.prefill(b.engine.cache_of(state), state.next_pos, b.layout.tokenize(suffix))
    with torch.inference_mode():
        return b.runtime.lm_head(hidden[0, -1]), state


def test_encoding_every_unit_through_the_kept_path_is_the_unreduced_tower(qwen, make_image):
    fam = qwen.backend.runtime
    _, inputs = _inputs(fam, [make_image(1, 150, 200), make_image(2, 300, 60)])
    with torch.inference_mode():
        full = fam.encode(inputs)
        kept = fam.encode(inputs, keep=[torch.arange(f.shape[0]) for f in full])
    assert all(torch.equal(a, b) for a, b in zip(full, kept, strict=True))


def test_keep_1_is_the_unreduced_model_on_logits(qwen, make_image):
    img = make_image(3)
    ref, ref_state = _prefix_logits(qwen, img, ReductionConfig())
    same, state = _prefix_logits(qwen, img, ReductionConfig("tower", 1.0))
    assert torch.equal(ref, same) and state.visual_tokens == ref_state.visual_tokens


def test_the_tower_blocks_see_a_quarter_of_the_patches(qwen, make_image):
    fam, img = qwen.family, make_image(4, 448, 448)
    seen = []
    tower = qwen.backend.model.model.visual
    hooks = [
        blk.register_forward_pre_hook(
            lambda m, args, kw: (
                seen.append(args[0].shape[0]) if args else seen.append(kw["hidden_states"].shape[0])
            ),
            with_kwargs=True,
        )
        for blk in tower.blocks
    ]
    try:
        full = qwen.generate([img], "What is it?", max_new_tokens=1)
        n_full = seen[0]
        seen.clear()
        r = qwen.generate([img], "What is it?", max_new_tokens=1, reduction=TOWER)
    finally:
        for h in hooks:
            h.remove()
    assert len(set(seen)) == 1 and len(seen) == len(tower.blocks)  # every block, the same length
    assert seen[0] == r.bill.visual_tokens * fam.merge**2
    assert 0.2 <= seen[0] / n_full <= 0.3
    assert n_full == full.bill.unreduced_visual_tokens * fam.merge**2
    assert r.bill.unreduced_visual_tokens == full.bill.visual_tokens


def test_billed_vision_flops_equal_the_counted_flops(qwen, make_image):
    fam = qwen.backend.runtime
    images = [make_image(5, 448, 448), make_image(6, 300, 60), make_image(7, 120, 90)]
    items, inputs = _inputs(fam, images)
    keep = fam.tower_keep(inputs, 0.25)
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        fam.encode(inputs, keep=keep)
    costs = [fam.tower_cost(it, [k]) for it, k in zip(items, keep, strict=True)]
    assert qwen.family.vision_flops(costs) == counter.get_total_flops()
    # and generate bills exactly that, below the unreduced tower
    r = qwen.generate(images[:1], "What is it?", max_new_tokens=1, reduction=TOWER)
    with torch.inference_mode(), FlopCounterMode(display=False) as one:
        fam.encode(_inputs(fam, images[:1])[1], keep=keep[:1])
    assert r.bill.vision_flops == r.bill.computed_vision_flops == one.get_total_flops()
    full = qwen.generate(images[:1], "What is it?", max_new_tokens=1)
    assert r.bill.vision_flops < 0.35 * full.bill.vision_flops


def test_kept_tokens_keep_their_mrope_positions(qwen, make_image):
    b, img = qwen.backend, make_image(8, 300, 300)
    prefix = b.layout.first_turn(1, None, "q")[0]
    full = b.engine.assemble([img], prefix, ReductionConfig())
    a = b.engine.assemble([img], prefix, TOWER)
    fam = b.runtime
    vis_full = (full.ids == fam.image_token_id).nonzero().squeeze(1)
    start = int(vis_full[0])
    keep = fam.tower_keep(fam.collate(fam.preprocess([img.to_pil()])), 0.25)[0]
    vis = (a.ids == fam.image_token_id).nonzero().squeeze(1)
    assert torch.equal(a.positions[:, vis], full.positions[:, start + keep])
    assert a.next_pos == full.next_pos and a.reduce_s > 0


def test_prefix_cache_keys_the_tower_reduction_and_a_hit_has_the_logits_and_bill(qwen, make_image):
    path = qwen.backend.model_id
    cached = VLM.load(
        path, device="cpu", attn_implementation="eager", kv_cache=KVPrefixCache(64 << 20)
    )
    img = make_image(9)
    first = cached.generate([img], "What is it?", max_new_tokens=3, reduction=TOWER)
    pool = cached.generate(
        [img], "What is it?", max_new_tokens=3, reduction=ReductionConfig("pool", 0.25)
    )
    again = cached.generate([img], "What is it?", max_new_tokens=3, reduction=TOWER)
    assert (first.bill.cache, pool.bill.cache, again.bill.cache) == ("miss", "miss", "hit")
    assert again.token_ids == first.token_ids
    assert (
        again.bill.vision_flops == first.bill.vision_flops and again.bill.computed_vision_flops == 0
    )
    b = cached.backend
    prefix, suffix = b.layout.first_turn(1, None, "What is it?")
    hit, status, *_ = b.engine.state([img], prefix, TOWER)
    fresh, *_ = b.engine.compute([img], prefix, TOWER)
    logits = []
    for state in (fresh, hit):
        hidden = b.engine.prefill(
            b.engine.cache_of(state), state.next_pos, b.layout.tokenize(suffix)
        )
        with torch.inference_mode():
            logits.append(b.runtime.lm_head(hidden[0, -1]))
    assert status == "hit" and torch.equal(*logits)


def test_batches_and_sessions_bill_the_reduced_tower(qwen, make_image):
    img = make_image(10)
    one = qwen.generate([img], "What is it?", max_new_tokens=2, reduction=TOWER)
    batch = qwen.generate_batch(
        [([img], "What is it?"), ([img], "Why?")], max_new_tokens=2, reduction=TOWER
    )
    assert [r.bill.visual_tokens for r in batch] == [one.bill.visual_tokens] * 2
    assert batch[0].bill.computed_vision_flops == one.bill.vision_flops
    assert batch[1].bill.computed_vision_flops == 0
    s = qwen.session([img], reduction=TOWER, max_new_tokens=2)
    r1, r2 = s.ask("What is it?"), s.ask("Why?")
    assert (
        r1.bill.visual_tokens == one.bill.visual_tokens
        and r1.bill.vision_flops == one.bill.vision_flops
    )
    assert r2.bill.computed_vision_flops == 0


def test_a_family_whose_tower_cannot_do_it_says_so(vlm_idefics3, image):
    with pytest.raises(InputError, match=r"'tower'.*idefics3.*vision tower"):
        vlm_idefics3.generate([image], "What is it?", max_new_tokens=1, reduction=TOWER)
    # keep 1.0 is the identity, which every family runs
    vlm_idefics3.generate(
        [image], "What is it?", max_new_tokens=1, reduction=ReductionConfig("tower", 1.0)
    )


def test_selection_covers_the_grid_and_prefers_detail():
    t, h, w, r = 1, 8, 12, 0.25
    units = torch.zeros(t * h * w, 16)
    units[5 * w + 7] = torch.arange(16.0)  # one textured unit among flat ones
    kept = tower_select(units, (t, h, w), r)
    oh, ow = round(h * math.sqrt(r)), round(w * math.sqrt(r))
    assert kept.numel() == oh * ow and kept.tolist() == sorted(set(kept.tolist()))
    cells = {(int(i) // w * oh // h, int(i) % w * ow // w) for i in kept}
    assert len(cells) == oh * ow  # one unit in every cell
    assert 5 * w + 7 in kept.tolist()
    assert torch.equal(tower_select(units, (t, h, w), 1.0), torch.arange(t * h * w))


def test_yaml_accepts_every_registered_reduction_method():
    from cascade.registry import get_stage_class
    from cascade.stages.vlm_answer import VLMAnswer
    from cascade.vlm import reduction_names
    from cascade.vlm.options import ModelSpec

    names = reduction_names()
    assert {"none", "pool", "divprune", "visionzip", "dart", "fastv", "tower"} <= set(names)
    for name in names:
        assert VLMAnswer.Params(reduction=name).reduction == name
        assert ModelSpec.model_validate({"id": "x", "reduction": name}).reduction == name
    schema = VLMAnswer.Params.model_json_schema()["properties"]["reduction"]["anyOf"][0]
    assert schema["enum"] == names  # what editors and docs read
    described = get_stage_class("vlm_answer").describe()["params"]["reduction"]["type"]
    assert all(n in described for n in names)  # what `cascade stages` prints
