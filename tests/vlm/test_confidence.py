"""The VLM's confidence: exp(mean log p) of its greedy tokens, the same on every path."""

import json
import math

import pytest
import torch

from cascade.trace import StageRecord, stage_scope
from cascade.vlm import VLM, ReductionConfig
from cascade.vlm.kv_cache import KVPrefixCache
from cascade.vlm.openai_backend import OpenAIBackend

from .test_generate import _plain


def plain_confidence(backend, images, question, tokens) -> float:
    """Recomputed from one plain `model(...)` forward over prompt + generated tokens."""
    inp = _plain(backend, images, question, len(tokens))
    n = inp["input_ids"].shape[1]
    new = torch.tensor([tokens[:-1]], dtype=inp["input_ids"].dtype)
    # Per-token inputs grow with the generated tokens: ids, mask, (mm_)token type ids (text: 0).
    inp = {
        k: torch.cat(
            [v, new if k == "input_ids" else torch.full_like(new, int(k == "attention_mask"))], 1
        )
        if torch.is_tensor(v) and v.shape[:2] == (1, n)
        else v
        for k, v in inp.items()
    }
    with torch.inference_mode():
        logits = backend.model(**inp).logits[0, n - 1 :]
    assert logits.argmax(-1).tolist() == list(tokens)  # the plain model picks the same tokens
    lp = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(tokens)[:, None])
    return math.exp(float(lp.mean()))


def test_confidence_is_the_geometric_mean_probability_of_a_plain_forward(vlm, make_image):
    images = [make_image(1), make_image(2, 120, 90)]
    q = "What is in the picture?"
    r = vlm.generate(images, q, max_new_tokens=10)
    assert 0.0 < r.confidence <= 1.0
    assert r.bill.generated_tokens > 1
    assert r.confidence == pytest.approx(
        plain_confidence(vlm.backend, images, q, r.token_ids), rel=1e-4
    )
    assert r.bill.confidence == r.confidence


def test_prefix_cache_hit_and_session_give_the_same_confidence(tiny_path, vlm, make_image):
    img, q = make_image(5), "Describe the image."
    ref = vlm.generate([img], q, max_new_tokens=6)
    cached = VLM.load(str(tiny_path), device="cpu", kv_cache=KVPrefixCache(1 << 26))
    miss = cached.generate([img], q, max_new_tokens=6)
    hit = cached.generate([img], q, max_new_tokens=6)
    assert (miss.bill.cache, hit.bill.cache) == ("miss", "hit")
    assert miss.confidence == pytest.approx(ref.confidence, rel=1e-5)
    assert hit.confidence == pytest.approx(ref.confidence, rel=1e-5)
    session = vlm.session([img], max_new_tokens=6)
    first = session.ask(q)
    second = session.ask("And the colours?")
    assert first.token_ids == ref.token_ids
    assert first.confidence == pytest.approx(ref.confidence, rel=1e-5)
    assert 0.0 < second.confidence <= 1.0 and second.bill.cache == "session"


def test_fastv_result_has_a_confidence(vlm, make_image):
    r = vlm.generate(
        [make_image(6)],
        "What is this?",
        max_new_tokens=5,
        reduction=ReductionConfig("fastv", 0.5, fastv_layer=1),
    )
    assert 0.0 < r.confidence <= 1.0


def test_one_token_confidence_is_its_probability(vlm, make_image):
    img, q = make_image(7), "Where?"
    r = vlm.generate([img], q, max_new_tokens=1)
    inp = _plain(vlm.backend, [img], q, 1)
    with torch.inference_mode():
        p = torch.softmax(vlm.backend.model(**inp).logits[0, -1].float(), -1).max()
    assert r.confidence == pytest.approx(float(p), rel=1e-4)


def _requests(make_image):
    a, b = make_image(21), make_image(22, 120, 90)
    return [
        ([a], "What is in the picture?"),
        ([b, a], "How many?"),
        ([make_image(23, 60, 200)], "Describe the image in detail: what colour is the bus?"),
    ]


def test_batched_confidence_equals_one_by_one(vlm, make_image):
    reqs = _requests(make_image)
    b = vlm.backend
    free = vlm.generate_batch(reqs, max_new_tokens=8)
    saved = b.decoder.eos_ids
    b.decoder.eos_ids = saved | {
        free[0].token_ids[2]
    }  # request 0 stops early; the batch decodes on
    try:
        batch = vlm.generate_batch(reqs, max_new_tokens=8)
        one = [vlm.generate(i, q, max_new_tokens=8) for i, q in reqs]
    finally:
        b.decoder.eos_ids = saved
    assert batch[0].bill.generated_tokens <= 3  # stopped at (or before) the injected end token
    for r, o in zip(batch, one, strict=True):
        assert r.token_ids == o.token_ids
        assert 0.0 < r.confidence <= 1.0
        assert r.confidence == pytest.approx(o.confidence, rel=1e-4)


def _mock_client(choice_extra: dict, seen: list):
    """An `openai.OpenAI` client whose transport answers every request with one choice."""
    import httpx2
    import openai

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(json.loads(request.content))
        choice = {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "a cat"},
            **choice_extra,
        }
        return httpx2.Response(
            200,
            json={
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [choice],
                "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
            },
        )

    return openai.OpenAI(
        base_url="http://test/v1",
        api_key="none",
        http_client=openai.DefaultHttpxClient(transport=httpx2.MockTransport(handler)),
    )


def test_openai_confidence_from_logprobs(image):
    seen: list = []
    lps = {
        "logprobs": {
            "content": [
                {"token": "a", "logprob": -0.1, "top_logprobs": []},
                {"token": " cat", "logprob": -0.7, "top_logprobs": []},
            ]
        }
    }
    r = OpenAIBackend("m", config=None, client=_mock_client(lps, seen)).generate([image], "What?")
    assert seen[0]["logprobs"] is True
    assert r.confidence == pytest.approx(math.exp(-0.4)) and r.bill.confidence == r.confidence
    assert r.logprobs == (-0.1, -0.7) and r.bill.generated_tokens == 2
    for extra in ({}, {"logprobs": None}, {"logprobs": {"content": None}}):
        r = OpenAIBackend("m", config=None, client=_mock_client(extra, [])).generate(
            [image], "What?"
        )
        assert r.confidence is None and r.bill.confidence is None


def test_vlm_answer_stage_outputs_and_records_confidence(tiny_path, image):
    from cascade.stages.vlm_answer import VLMAnswer

    st = VLMAnswer(
        {"max_new_tokens": 4}, name="vlm", models={"vlm": {"id": str(tiny_path), "device": "cpu"}}
    )
    rec = StageRecord("vlm", "vlm_answer")
    with stage_scope(rec):
        out = st(images=[image], question="What is this?")
    assert 0.0 < out.confidence <= 1.0
    assert out.confidence == out.answer.bill.confidence
