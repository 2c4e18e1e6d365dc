"""With reduction off, the runtime is the plain model: same logits, same greedy tokens."""

import pytest
import torch

from cascade.vlm import VLM, ReductionConfig


def _plain(backend, images, question, max_new_tokens):
    msgs = [
        {
            "role": "user",
            "content": [{"type": "image"}] * len(images) + [{"type": "text", "text": question}],
        }
    ]
    text = backend.processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    inp = backend.processor(text=[text], images=[im.to_pil() for im in images], return_tensors="pt")
    return inp


@pytest.mark.parametrize(
    "fixture", ["tiny_path", "tiny_path_25", "tiny_path_idefics3", "tiny_path_qwen3"]
)
def test_greedy_tokens_equal_model_generate(request, fixture, make_image):
    vlm = VLM.load(str(request.getfixturevalue(fixture)), device="cpu")
    b = vlm.backend
    images = [make_image(1), make_image(2, 120, 90)]
    q = "What is in the picture?"
    inp = _plain(b, images, q, 12)
    with torch.inference_mode():
        out = b.model.generate(**inp, max_new_tokens=12, do_sample=False)
    expected = out[0, inp["input_ids"].shape[1] :].tolist()
    r = vlm.generate(images, q, max_new_tokens=12)
    assert list(r.token_ids) == expected
    assert (
        r.bill.visual_tokens
        == r.bill.unreduced_visual_tokens
        == int((inp["input_ids"] == b.family.image_token_id).sum())
    )
    assert r.bill.visual_tokens + r.bill.prompt_tokens == inp["input_ids"].shape[1]


def test_first_token_logits_match_full_forward(vlm, make_image):
    b = vlm.backend
    img = make_image(3)
    q = "Describe the image."
    inp = _plain(b, [img], q, 1)
    with torch.inference_mode():
        ref = b.model(**inp).logits[0, -1]
    prefix, suffix = b.layout.first_turn(1, None, q)
    state, *_ = b.engine.compute([img], prefix, ReductionConfig())
    cache = b.engine.cache_of(state)
    hidden = b.engine.prefill(cache, state.next_pos, b.layout.tokenize(suffix))
    with torch.inference_mode():
        got = b.runtime.lm_head(hidden[0, -1])
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)


def test_result_accounting(vlm, image):
    r = vlm.generate([image], "What is this?", max_new_tokens=5)
    b = r.bill
    assert b.generated_tokens == len(r.token_ids) == len(r.logprobs) <= 5
    assert b.prefill_flops == b.unreduced_prefill_flops == b.computed_prefill_flops > 0
    assert b.vision_flops == b.computed_vision_flops > 0 and b.images_encoded == 1
    assert (b.decode_flops > 0) == (b.generated_tokens > 1)
    assert b.ttft_s <= b.total_s and b.vision_s > 0 and b.prefill_s > 0
    assert b.cache == "off" and b.cached_tokens == 0
    assert b.to_dict()["input_tokens"] == b.visual_tokens + b.prompt_tokens
    assert r.peak_memory_bytes and r.peak_memory_kind == "process_peak_rss"
    assert b.prefill_savings == pytest.approx(1.0)


def test_pixel_budget_changes_tokens_and_cache_key(tiny_path, image):
    small = VLM.load(str(tiny_path), device="cpu", max_pixels=28 * 28 * 4)
    r = small.generate([image], "What?", max_new_tokens=1)
    assert r.bill.unreduced_visual_tokens <= 4
    assert (
        small.backend.family.preprocessing_key()
        != VLM.load(str(tiny_path), device="cpu").backend.family.preprocessing_key()
    )
