"""The second family: Idefics3 / SmolVLM (tiles + pixel shuffle, 1-D RoPE Llama decoder)."""

import pytest
import torch

from cascade.errors import CascadeError, InputError
from cascade.vlm import VLM, ReductionConfig, build_tiny_vlm, reduction_names
from cascade.vlm.families import FAMILIES
from cascade.vlm.reduction import keep_count


def test_tiny_idefics3_loads_the_normal_way(tiny_path_idefics3):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny_path_idefics3)
    model = AutoModelForImageTextToText.from_pretrained(tiny_path_idefics3)
    assert type(model).__name__ == "Idefics3ForConditionalGeneration"
    assert type(processor).__name__ == "Idefics3Processor"
    tok = processor.tokenizer
    for special in (
        "<image>",
        "<fake_token_around_image>",
        "<global-img>",
        "<row_1_col_1>",
        "<row_6_col_6>",
        "<end_of_utterance>",
        "<|im_start|>",
    ):
        ids = tok(special, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1 and ids[0] == tok.convert_tokens_to_ids(special)
    assert model.config.image_token_id == tok.convert_tokens_to_ids("<image>")
    assert processor.image_seq_len == 16  # 64 px tiles, 8 px patches, pixel shuffle 2
    assert build_tiny_vlm(tiny_path_idefics3.parent, family="idefics3") == tiny_path_idefics3


def _expected_visual_tokens(processor, images) -> int:
    """Tiles (rows x cols + the global image, or just the global one) x tokens per tile."""
    ip = processor.image_processor
    total = 0
    for im in images:
        h, w = im.pixels.shape[:2]
        n, _, _ = ip.get_number_of_image_patches(h, w)
        total += max(n, 1) * processor.image_seq_len
    return total


def test_accounting_follows_the_tile_grid(vlm_idefics3, make_image):
    b = vlm_idefics3.backend
    images = [make_image(1), make_image(2, 150, 60)]  # 2x2 tiles + global; 2x1 + global
    r = vlm_idefics3.generate(images, "What is this?", max_new_tokens=3)
    assert (
        r.bill.visual_tokens
        == r.bill.unreduced_visual_tokens
        == _expected_visual_tokens(b.processor, images)
        == 128
    )
    pre = b.runtime.build_prefix(
        b.layout.first_turn(2, None, "q")[0], b.runtime.preprocess([im.to_pil() for im in images])
    )
    assert len(pre.spans) == 8 and all(g == (1, 4, 4) for g in pre.grids)
    assert r.bill.prefill_flops == r.bill.unreduced_prefill_flops > 0


@pytest.mark.parametrize("method", reduction_names("after_tower"))
def test_pruning_is_the_plain_model_on_fewer_placeholders(vlm_idefics3, make_image, method):
    """1-D positions: a pruned prefix is exactly the model fed the kept tokens contiguously."""
    b = vlm_idefics3.backend
    fam = b.runtime
    img = make_image(3)
    prefix, suffix = b.layout.first_turn(1, None, "Describe the image.")
    red = ReductionConfig(method, 0.25)
    a = b.engine.assemble([img], prefix, red)
    n_vis = int((a.ids == fam.image_token_id).sum())
    assert a.unreduced == 80 and n_vis == (5 * 4 if method == "pool" else 5 * keep_count(16, 0.25))
    assert a.positions.tolist() == [list(range(a.ids.numel()))] and a.next_pos == a.ids.numel()
    sfx = b.layout.tokenize(suffix)
    with torch.inference_mode():
        full = torch.cat([a.embeds, fam.embed(torch.tensor(sfx))])[None]
        ref = b.model.lm_head(fam.text_model(inputs_embeds=full).last_hidden_state[0, -1])
        state, *_ = b.engine.compute([img], prefix, red)
        hidden = b.engine.prefill(b.engine.cache_of(state), state.next_pos, sfx)
        got = fam.lm_head(hidden[0, -1])
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)
    r = vlm_idefics3.generate([img], "Describe the image.", max_new_tokens=3, reduction=red)
    assert r.bill.visual_tokens == n_vis and r.bill.prefill_flops < r.bill.unreduced_prefill_flops


def test_fastv_generates(vlm_idefics3, image):
    r = vlm_idefics3.generate(
        [image],
        "What colour?",
        max_new_tokens=3,
        reduction=ReductionConfig("fastv", 0.5, fastv_layer=1),
    )
    assert r.bill.visual_tokens == 40 and r.bill.unreduced_visual_tokens == 80


def test_kv_cache_hit_and_session(tiny_path_idefics3, vlm_idefics3, make_image):
    cached = VLM.load(str(tiny_path_idefics3), device="cpu", kv_cache_bytes=16 << 20)
    img = make_image(4)
    red = ReductionConfig("pool", 0.25)
    assert (
        cached.generate([img], "What is this?", max_new_tokens=6, reduction=red).bill.cache
        == "miss"
    )
    hit = cached.generate([img], "Where is it?", max_new_tokens=6, reduction=red)
    ref = vlm_idefics3.generate([img], "Where is it?", max_new_tokens=6, reduction=red)
    assert (
        hit.bill.cache == "hit"
        and hit.token_ids == ref.token_ids
        and cached.vision_tower_calls == 1
    )
    s = cached.session([img], reduction=red, max_new_tokens=4)
    r1, r2 = s.ask("Anything?"), s.ask("And?")
    assert (r1.bill.cache, r2.bill.cache) == ("hit", "session") and s.vision_tower_calls == 0
    assert r2.bill.prompt_tokens > r1.bill.prompt_tokens


def test_unsupported_reduction_is_refused(tiny_path_idefics3, image, monkeypatch):
    vlm = VLM.load(str(tiny_path_idefics3), device="cpu")
    monkeypatch.setattr(vlm.backend.family, "supports", lambda m: m in ("none", "pool"))
    with pytest.raises(
        InputError, match=r"'divprune' is not supported for idefics3.*\['none', 'pool'\]"
    ):
        vlm.generate([image], "q", reduction=ReductionConfig("divprune", 0.5))
    with pytest.raises(InputError, match="not supported"):
        vlm.session([image], reduction=ReductionConfig("dart", 0.5))
    assert (
        vlm.generate(
            [image], "q", max_new_tokens=1, reduction=ReductionConfig("dart", 1.0)
        ).bill.visual_tokens
        == 80
    )


def test_limits_are_the_longest_edge_and_placeholder_in_question(
    tiny_path_idefics3, vlm_idefics3, image
):
    with pytest.raises(
        InputError, match=r"no 'max_pixels' image limit; its limits: \['longest_edge'\]"
    ):
        VLM.load(str(tiny_path_idefics3), device="cpu", max_pixels=28 * 28 * 4)
    small = VLM.load(str(tiny_path_idefics3), device="cpu", longest_edge=64)  # one 64-px tile
    assert small.family.visual_tokens(200, 150) == 16
    assert small.generate([image], "q", max_new_tokens=1).bill.visual_tokens == 16
    with pytest.raises(InputError, match="placeholder"):
        vlm_idefics3.generate([image], "Look: <image>")


def test_unsupported_model_type_lists_both_families(tmp_path):
    from transformers import LlamaConfig

    assert {"idefics3", "smolvlm", "qwen2_vl", "qwen2_5_vl"} <= set(FAMILIES)
    LlamaConfig(
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        vocab_size=64,
    ).save_pretrained(tmp_path)
    with pytest.raises(
        CascadeError, match=r"'llama' is not supported.*'idefics3'.*'qwen2_vl'.*'smolvlm'"
    ):
        VLM.load(str(tmp_path), device="cpu")


def test_smolvlm_model_type_runs_like_model_generate(tmp_path, make_image):
    """SmolVLM's model is Idefics3's under another name. (Its own processor needs `num2words`,
    which is not installed here, so the tiny Idefics3 processor stands in.)"""
    from transformers import AutoModelForImageTextToText, GenerationConfig, SmolVLMConfig

    from cascade.vlm import tiny
    from cascade.vlm.tiny_recipes import idefics3

    s = tiny._SHAPES["test"]
    ref, processor = idefics3(
        "idefics3",
        s,
        lambda special, eos, template: tiny._train_tokenizer(s["vocab"], special, eos, template),
    )
    cfg = SmolVLMConfig(
        text_config=ref.text_config.to_dict(),
        vision_config=ref.vision_config.to_dict(),
        scale_factor=ref.scale_factor,
        image_token_id=ref.image_token_id,
    )
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_config(cfg).eval()
    model.generation_config = GenerationConfig(
        do_sample=False, eos_token_id=cfg.text_config.eos_token_id
    )
    model.save_pretrained(tmp_path)
    processor.save_pretrained(tmp_path)
    vlm = VLM.load(str(tmp_path), device="cpu")
    b = vlm.backend
    assert b.model.config.model_type == "smolvlm" and type(b.family).__name__ == "Idefics3Family"
    images, q = [make_image(5), make_image(6, 60, 90)], "What is it?"
    text = b.processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}] * 2 + [{"type": "text", "text": q}]}],
        add_generation_prompt=True,
        tokenize=False,
    )
    inp = b.processor(text=[text], images=[im.to_pil() for im in images], return_tensors="pt")
    with torch.inference_mode():
        out = b.model.generate(**inp, max_new_tokens=8, do_sample=False)
    assert (
        list(vlm.generate(images, q, max_new_tokens=8).token_ids)
        == out[0, inp["input_ids"].shape[1] :].tolist()
    )
