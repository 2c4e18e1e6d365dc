"""Batched generation: the tokens of one-by-one `generate`, each distinct image encoded once."""

import pytest
import torch

from cascade.errors import InputError
from cascade.vlm import VLM, ReductionConfig


def _requests(make_image):
    a, b, c = make_image(21), make_image(22, 120, 90), make_image(23, 60, 200)
    same_as_a = type(a)(a.pixels.copy(), source="a-again.png")  # same content, another source
    return [
        ([a], "What is in the picture?"),
        ([b, a], "How many?"),
        ([c], "Describe the image in detail: what colour is the bus, where is the cat?"),
        ([same_as_a], "Where?"),
    ]


@pytest.mark.parametrize(
    "fixture,red",
    [
        ("vlm", None),
        ("vlm", ReductionConfig("divprune", 0.5)),
        ("vlm_idefics3", None),
        ("vlm_idefics3", ReductionConfig("pool", 0.25)),
    ],
)
def test_batched_tokens_equal_one_by_one(request, make_image, fixture, red):
    vlm = request.getfixturevalue(fixture)
    reqs = _requests(make_image)
    images0, calls0 = vlm.vision_images_encoded, vlm.vision_tower_calls
    batch = vlm.generate_batch(reqs, max_new_tokens=8, reduction=red)
    assert vlm.vision_images_encoded - images0 == 3  # a, b, c: a is asked about three times
    assert vlm.vision_tower_calls - calls0 == 1
    one = [vlm.generate(images, q, max_new_tokens=8, reduction=red) for images, q in reqs]
    for r, o in zip(batch, one, strict=True):
        assert r.token_ids == o.token_ids and r.text == o.text
        assert (r.bill.visual_tokens, r.bill.unreduced_visual_tokens, r.bill.prompt_tokens) == (
            o.bill.visual_tokens,
            o.bill.unreduced_visual_tokens,
            o.bill.prompt_tokens,
        )
        assert r.bill.prefill_flops == r.bill.computed_prefill_flops == o.bill.prefill_flops
        assert r.bill.cache == "off" and r.finish_reason == o.finish_reason
        assert r.bill.ttft_s <= r.bill.total_s
    assert (
        len({r.bill.prompt_tokens for r in batch}) == 4
    )  # prompts of different lengths were padded


def test_qwen25_batched_tokens_equal_one_by_one(tiny_path_25, make_image):
    vlm = VLM.load(str(tiny_path_25), device="cpu")
    reqs = _requests(make_image)[:3]
    batch = vlm.generate_batch(reqs, max_new_tokens=6)
    assert [r.token_ids for r in batch] == [
        vlm.generate(i, q, max_new_tokens=6).token_ids for i, q in reqs
    ]


def test_each_request_stops_at_its_own_end_token(vlm, make_image):
    b = vlm.backend
    reqs = _requests(make_image)[:3]
    free = vlm.generate_batch(reqs, max_new_tokens=8)
    stop = free[0].token_ids[2]  # pretend request 0's third token ends the turn
    saved = b.decoder.eos_ids
    b.decoder.eos_ids = saved | {stop}
    try:
        batch = vlm.generate_batch(reqs, max_new_tokens=8)
        one = [vlm.generate(i, q, max_new_tokens=8) for i, q in reqs]
    finally:
        b.decoder.eos_ids = saved
    assert batch[0].finish_reason == "stop" and len(batch[0].token_ids) <= 3
    assert [r.token_ids for r in batch] == [r.token_ids for r in one]
    assert [r.finish_reason for r in batch] == [r.finish_reason for r in one]


def test_per_request_mrope_positions_equal_get_rope_index_on_the_padded_batch(vlm, make_image):
    """What the batch feeds (each request's own positions, left-padded) is what the model's
    get_rope_index computes for the padded batch with its attention mask."""
    b = vlm.backend
    fam = b.runtime
    pres = [
        fam.build_prefix(
            b.layout.first_turn(len(ims), None, q)[0] + q,
            fam.preprocess([im.to_pil() for im in ims]),
        )
        for ims, q in _requests(make_image)[:3]
    ]
    L = max(p.input_ids.numel() for p in pres)
    ids = torch.full((len(pres), L), b.processor.tokenizer.pad_token_id)
    mask = torch.zeros(len(pres), L, dtype=torch.long)
    for i, p in enumerate(pres):
        ids[i, L - p.input_ids.numel() :], mask[i, L - p.input_ids.numel() :] = p.input_ids, 1
    grids = torch.cat([p.vision_inputs["image_grid_thw"] for p in pres])
    pos, _ = b.model.model.get_rope_index(
        ids,
        mm_token_type_ids=(ids == fam.image_token_id).int(),
        image_grid_thw=grids,
        attention_mask=mask,
    )
    for i, p in enumerate(pres):
        assert torch.equal(pos[:, i, L - p.input_ids.numel() :], p.positions)


def test_batch_bypasses_the_prefix_cache_and_validates(tiny_path, make_image):
    vlm = VLM.load(str(tiny_path), device="cpu", kv_cache_bytes=16 << 20)
    reqs = _requests(make_image)[:2]
    assert all(r.bill.cache == "off" for r in vlm.generate_batch(reqs, max_new_tokens=2))
    assert len(vlm.kv_cache) == 0 and vlm.kv_cache.misses == 0
    assert vlm.generate_batch([], max_new_tokens=2) == []
    with pytest.raises(InputError, match="not batched"):
        vlm.generate_batch(reqs, reduction=ReductionConfig("fastv", 0.5, fastv_layer=1))
    with pytest.raises(InputError, match=r"request 1: no image"):
        vlm.generate_batch([reqs[0], ([], "q")])
    with pytest.raises(InputError, match=r"request 0: expected an \(images, question\) pair"):
        vlm.generate_batch(["just a question"])
    with pytest.raises(InputError, match="non-empty"):
        vlm.generate_batch([(reqs[0][0], " ")])
