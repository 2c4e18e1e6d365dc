"""The third family: Qwen3-VL (16-px patches, DeepStack features added to the first decoder layers).

Greedy identity with `model.generate` is in test_generate.py, FastV against its masked reference
in test_fastv.py, the FLOP counts in test_cost_model.py; here: the tiny checkpoint, the features
DeepStack adds, reductions, the prefix cache, sessions and batches.
"""

import pytest
import torch

from cascade.vlm import VLM, ReductionConfig, reduction_names


def test_tiny_qwen3_loads_the_normal_way(tiny_path_qwen3):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny_path_qwen3)
    model = AutoModelForImageTextToText.from_pretrained(tiny_path_qwen3)
    assert type(model).__name__ == "Qwen3VLForConditionalGeneration"
    assert type(processor).__name__ == "Qwen3VLProcessor"
    assert processor.image_processor.patch_size == model.config.vision_config.patch_size == 16
    assert len(model.config.vision_config.deepstack_visual_indexes) == 2


def test_features_carry_every_deepstack_level(vlm_qwen3, make_image):
    b = vlm_qwen3.backend
    fam = b.runtime
    img = make_image(1)
    a = b.engine.assemble([img], b.layout.first_turn(1, None, "q")[0], ReductionConfig())
    n_vis = int((a.ids == fam.image_token_id).sum())
    assert n_vis == b.family.visual_tokens(img.width, img.height) == a.unreduced
    assert a.extra.shape == (n_vis, b.family.levels, fam.text_config.hidden_size)
    # DeepStack changes the answer: the decoder without the extra features computes other logits.
    with torch.inference_mode():
        mask = (a.ids == fam.image_token_id)[None]
        with_ds = fam.forward(
            a.embeds[None], a.positions, b.engine.new_cache(), **fam.visual_kwargs(mask, a.extra)
        )
        without = fam.forward(a.embeds[None], a.positions, b.engine.new_cache())
    assert not torch.allclose(with_ds, without)


@pytest.mark.parametrize("method", reduction_names("after_tower"))
def test_reductions_prune_all_levels_together(vlm_qwen3, make_image, method):
    b = vlm_qwen3.backend
    img = make_image(2)
    a = b.engine.assemble(
        [img], b.layout.first_turn(1, None, "q")[0], ReductionConfig(method, 0.25)
    )
    n_vis = int((a.ids == b.family.image_token_id).sum())
    assert n_vis < a.unreduced and a.extra.shape[0] == n_vis
    r = vlm_qwen3.generate(
        [img], "What is this?", max_new_tokens=3, reduction=ReductionConfig(method, 0.25)
    )
    assert r.bill.visual_tokens == n_vis and r.bill.prefill_flops < r.bill.unreduced_prefill_flops
    # keep_ratio 1.0 is the unreduced model, token for token
    same = vlm_qwen3.generate(
        [img], "What is this?", max_new_tokens=6, reduction=ReductionConfig(method, 1.0)
    )
    assert same.token_ids == vlm_qwen3.generate([img], "What is this?", max_new_tokens=6).token_ids


def test_prefix_cache_hit_has_the_logits_of_recomputation_and_sessions_reuse_it(
    tiny_path_qwen3, vlm_qwen3, make_image
):
    cached = VLM.load(str(tiny_path_qwen3), device="cpu", kv_cache_bytes=16 << 20)
    b = cached.backend
    img, red = make_image(3), ReductionConfig("divprune", 0.5)
    prefix, suffix = b.layout.first_turn(1, None, "Where is it?")
    fresh, *_ = b.engine.compute([img], prefix, red)
    assert b.engine.state([img], prefix, red)[1] == "miss"
    hit, status, *_ = b.engine.state([img], prefix, red)
    logits = []
    for state in (fresh, hit):
        hidden = b.engine.prefill(
            b.engine.cache_of(state), state.next_pos, b.layout.tokenize(suffix)
        )
        with torch.inference_mode():
            logits.append(b.runtime.lm_head(hidden[0, -1]))
    assert status == "hit" and torch.equal(*logits)
    r = cached.generate([img], "Where is it?", max_new_tokens=6, reduction=red)
    ref = vlm_qwen3.generate([img], "Where is it?", max_new_tokens=6, reduction=red)
    assert r.bill.cache == "hit" and r.token_ids == ref.token_ids
    s = cached.session([img], reduction=red, max_new_tokens=4)
    r1, r2 = s.ask("Anything?"), s.ask("And?")
    assert (r1.bill.cache, r2.bill.cache) == ("hit", "session") and s.vision_tower_calls == 0


@pytest.mark.parametrize("red", [None, ReductionConfig("pool", 0.25)])
def test_batch_equals_one_by_one(vlm_qwen3, make_image, red):
    a, b = make_image(4), make_image(5, 120, 90)
    reqs = [
        ([a], "What is in the picture?"),
        ([b, a], "How many?"),
        ([b], "Describe it in detail."),
    ]
    batch = vlm_qwen3.generate_batch(reqs, max_new_tokens=6, reduction=red)
    one = [vlm_qwen3.generate(i, q, max_new_tokens=6, reduction=red) for i, q in reqs]
    assert [r.token_ids for r in batch] == [o.token_ids for o in one]
    assert [r.bill.visual_tokens for r in batch] == [o.bill.visual_tokens for o in one]
