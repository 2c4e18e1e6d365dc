"""Decoding beyond greedy: sampling, streaming, per-token logprobs, conversation history."""

import math

import pytest
import torch
from pydantic import ValidationError

from cascade.errors import InputError
from cascade.vlm import VLM, SamplingParams

Q = "What is in the picture?"


def test_sampling_reduces_to_greedy_at_its_limits(vlm, make_image):
    img = make_image(1)
    greedy = vlm.generate([img], Q, max_new_tokens=8)
    for s in (
        SamplingParams(temperature=1.0, top_k=1),
        SamplingParams(temperature=1.0, top_p=1e-9, seed=3),
    ):
        assert vlm.generate([img], Q, max_new_tokens=8, sampling=s).token_ids == greedy.token_ids


def test_seeded_sampling_is_reproducible_and_follows_the_seed(vlm, make_image):
    img = make_image(2)
    hot = dict(temperature=50.0)  # random weights, flattened: every seed draws its own tokens
    a = vlm.generate([img], Q, max_new_tokens=8, sampling=SamplingParams(seed=1, **hot))
    b = vlm.generate([img], Q, max_new_tokens=8, sampling=SamplingParams(seed=1, **hot))
    c = vlm.generate([img], Q, max_new_tokens=8, sampling=SamplingParams(seed=2, **hot))
    assert a.token_ids == b.token_ids != c.token_ids
    greedy = vlm.generate([img], Q, max_new_tokens=8)
    assert a.token_ids != greedy.token_ids
    # logprobs stay the model's own (untempered): the greedy token is the most likely one
    assert max(greedy.logprobs) <= 0 and all(lp <= 0 for lp in a.logprobs)


def test_seeded_batch_equals_seeded_one_by_one(vlm, make_image):
    reqs = [([make_image(3)], Q), ([make_image(4, 120, 90)], "Where?")]
    s = SamplingParams(temperature=2.0, top_k=50, seed=7)
    batch = vlm.generate_batch(reqs, max_new_tokens=6, sampling=s)
    assert [r.token_ids for r in batch] == [
        vlm.generate(i, q, max_new_tokens=6, sampling=s).token_ids for i, q in reqs
    ]


def test_streamed_tokens_are_the_answer(vlm, make_image):
    img = make_image(5)
    events = []
    r = vlm.generate(
        [img],
        Q,
        max_new_tokens=10,
        on_token=events.append,
        sampling=SamplingParams(logprobs=True, top_logprobs=3),
    )
    assert [e.token_id for e in events] == list(r.token_ids)
    assert "".join(e.text for e in events) == r.text
    assert [e.logprob for e in events] == list(r.logprobs)
    assert [e.index for e in events] == list(range(len(events))) and {
        e.request for e in events
    } == {0}
    # top_logprobs: the greedy token is the first alternative, with its own logprob
    assert all(
        top[0] == (tok, lp) and len(top) == 3
        for tok, lp, top in zip(r.token_ids, r.logprobs, r.top_logprobs, strict=True)
    )
    assert r.confidence == pytest.approx(math.exp(sum(r.logprobs) / len(r.logprobs)))
    stream = vlm.stream([img], Q, max_new_tokens=10)
    assert [e.token_id for e in stream] == list(r.token_ids) and stream.result.text == r.text


def test_stream_reraises_the_error():
    import numpy as np

    from cascade.artifacts import Image

    class Broken:
        def generate(self, *a, on_token=None, **kw):
            on_token("first")
            raise InputError("boom")

    stream = VLM(Broken()).stream([Image(np.zeros((4, 4, 3), np.uint8))], "q")
    seen = []
    with pytest.raises(InputError, match="boom"):
        for event in stream:
            seen.append(event)
    assert seen == ["first"] and stream.result is None


def test_history_is_the_chat_template_and_keeps_the_prefix_cache(tiny_path, make_image):
    vlm = VLM.load(str(tiny_path), device="cpu", kv_cache_bytes=16 << 20)
    b = vlm.backend
    img = make_image(6)
    history = [("What is it?", "A cat on a mat."), ("Which colour?", "Grey.")]
    msgs = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": history[0][0]}]},
        {"role": "assistant", "content": [{"type": "text", "text": history[0][1]}]},
        {"role": "user", "content": [{"type": "text", "text": history[1][0]}]},
        {"role": "assistant", "content": [{"type": "text", "text": history[1][1]}]},
        {"role": "user", "content": [{"type": "text", "text": "And its size?"}]},
    ]
    text = b.processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    inp = b.processor(text=[text], images=[img.to_pil()], return_tensors="pt")
    with torch.inference_mode():
        out = b.model.generate(**inp, max_new_tokens=8, do_sample=False)
    first = vlm.generate([img], history[0][0], max_new_tokens=2)
    r = vlm.generate([img], "And its size?", max_new_tokens=8, history=history)
    assert list(r.token_ids) == out[0, inp["input_ids"].shape[1] :].tolist()
    assert (first.bill.cache, r.bill.cache) == ("miss", "hit")  # the media prefix is reused
    assert r.bill.visual_tokens + r.bill.prompt_tokens == inp["input_ids"].shape[1]
    with pytest.raises(InputError, match=r"history\[0\]: expected a \(question, answer\) pair"):
        vlm.generate([img], "q", history=["just a string"])


def test_sampling_settings_are_checked():
    with pytest.raises(ValidationError, match="temperature"):
        SamplingParams(temperature=-1)
    with pytest.raises(ValidationError, match="top_p"):
        SamplingParams(top_p=0)
    with pytest.raises(ValidationError, match="top_k"):
        SamplingParams(top_k=-2)
