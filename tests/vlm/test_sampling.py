"""Sampling in the decode loop: per-sequence settings and generators, n completions from one
prefill, stop strings and ids, logprobs in OpenAI's shape, penalties, and the checks."""

import pytest
import torch
from pydantic import ValidationError

from cascade.decoding import GREEDY, SamplingParams, sampling_params
from cascade.errors import InputError
from cascade.vlm.decode import share_prefix
from cascade.vlm.reduction import ReductionConfig

Q = "What is in the picture?"
HOT = dict(temperature=50.0)  # random weights, flattened: each seed draws its own tokens


def _prefilled(vlm, image):
    """One prompt prefilled the way `generate` prefills it: (hidden, cache, next position)."""
    b = vlm.backend
    prefix_text, suffix_text = b.layout.first_turn(1, None, Q, ())
    suffix = b.layout.tokenize(suffix_text)
    state, *_ = b.engine.state([image], prefix_text, ReductionConfig())
    cache = b.engine.cache_of(state)
    return b.engine.prefill(cache, state.next_pos, suffix), cache, state.next_pos + len(suffix)


def test_a_seeded_sequence_draws_the_same_tokens_alone_and_beside_a_greedy_one(vlm, make_image):
    img = make_image(11)
    seeded = SamplingParams(seed=5, top_k=40, repetition_penalty=1.3, **HOT)
    alone = vlm.generate([img], Q, max_new_tokens=10, sampling=seeded)
    greedy = vlm.generate([img], Q, max_new_tokens=10)
    # One forward over both rows: each keeps its own settings and generator.
    d = vlm.backend.decoder
    hidden, cache, pos = _prefilled(vlm, img)
    seqs = [*d.sequences(GREEDY, 10), *d.sequences(seeded, 10, request=1)]
    together = d.run(share_prefix(hidden, cache, 2), cache, [pos, pos], seqs)
    assert together[0].tokens == list(greedy.token_ids)
    assert together[1].tokens == list(alone.token_ids) != list(greedy.token_ids)


def test_n_completions_share_one_prefill_and_follow_vllms_seeds(tiny_path, make_image):
    from cascade.vlm import VLM

    vlm = VLM.load(str(tiny_path), device="cpu")
    img = make_image(12)
    r = vlm.generate([img], Q, max_new_tokens=8, sampling=SamplingParams(n=3, seed=40, **HOT))
    assert vlm.vision_tower_calls == 1 and len(r.completions) == 3
    assert r.text == r.completions[0].text and r.token_ids == r.completions[0].token_ids
    # completion i is the n=1 answer seeded with seed + i
    for i, c in enumerate(r.completions):
        one = vlm.generate([img], Q, max_new_tokens=8, sampling=SamplingParams(seed=40 + i, **HOT))
        assert c.token_ids == one.token_ids and c.text == one.text
    assert len({c.token_ids for c in r.completions}) == 3
    assert r.bill.generated_tokens == sum(len(c.token_ids) for c in r.completions)


def test_n_greedy_completions_are_the_greedy_answer(vlm, make_image):
    img = make_image(13)
    greedy = vlm.generate([img], Q, max_new_tokens=8)
    r = vlm.generate([img], Q, max_new_tokens=8, sampling=SamplingParams(n=2))
    assert [c.token_ids for c in r.completions] == [greedy.token_ids] * 2


def test_a_stop_string_ends_the_answer_and_is_never_streamed(vlm, make_image):
    img = make_image(14)
    full = vlm.generate([img], Q, max_new_tokens=24)
    stop = full.text[len(full.text) // 2 :][:3]
    assert stop and stop in full.text
    events = []
    r = vlm.generate(
        [img],
        Q,
        max_new_tokens=24,
        sampling=SamplingParams(stop=["\u2603", stop]),
        on_token=events.append,
    )
    assert r.text == full.text[: full.text.index(stop)] and stop not in r.text
    assert r.finish_reason == "stop" and r.completions[0].finish_reason == "stop"
    assert "".join(e.text for e in events) == r.text
    assert len(r.token_ids) < len(full.token_ids)


def test_stop_token_ids_end_the_answer_without_their_text(vlm, make_image):
    img = make_image(15)
    full = vlm.generate([img], Q, max_new_tokens=12)
    stop_id = full.token_ids[2]
    r = vlm.generate([img], Q, max_new_tokens=12, sampling=SamplingParams(stop_token_ids=[stop_id]))
    first = full.token_ids.index(stop_id)
    assert r.token_ids == full.token_ids[: first + 1] and r.finish_reason == "stop"
    tok = vlm.backend.processor.tokenizer
    assert r.text == tok.decode(full.token_ids[:first], skip_special_tokens=True)


def test_logprobs_come_in_openais_shape(vlm, make_image):
    img = make_image(16)
    events = []
    r = vlm.generate(
        [img],
        Q,
        max_new_tokens=10,
        on_token=events.append,
        sampling=SamplingParams(logprobs=True, top_logprobs=2),
    )
    entries = r.completions[0].logprobs
    assert len(entries) == len(r.token_ids) == len(events)
    assert [e.entry for e in events] == list(entries)
    for e, lp in zip(entries, r.logprobs, strict=True):
        assert e.logprob == lp and len(e.top) == 2 and e.top[0].logprob >= e.top[1].logprob
        assert e.top[0].logprob == pytest.approx(lp)  # greedy: the chosen token is the top one
        d = e.to_openai()
        assert set(d) == {"token", "logprob", "bytes", "top_logprobs"}
        assert set(d["top_logprobs"][0]) == {"token", "logprob", "bytes"}
    raw = b"".join(bytes(e.bytes) for e in entries)  # byte-level BPE: the answer's own bytes
    tok = vlm.backend.processor.tokenizer
    assert raw.decode("utf-8", errors="replace") == tok.decode(list(r.token_ids))
    assert vlm.generate([img], Q, max_new_tokens=4).completions[0].logprobs is None


def test_penalties_and_cuts(vlm, make_image):
    img = make_image(0)
    greedy = vlm.generate([img], Q, max_new_tokens=16)
    assert len(set(greedy.token_ids)) < len(greedy.token_ids)  # the random model repeats itself
    for s in (
        SamplingParams(repetition_penalty=50.0),
        SamplingParams(frequency_penalty=2.0),
        SamplingParams(presence_penalty=2.0),
    ):
        assert vlm.generate([img], Q, max_new_tokens=16, sampling=s).token_ids != greedy.token_ids
    # cuts that leave only the most likely token reduce sampling to greedy
    for s in (
        SamplingParams(min_p=1.0, seed=1, **HOT),
        SamplingParams(top_k=1, **HOT),
        SamplingParams(top_p=1e-9, **HOT),
    ):
        assert vlm.generate([img], Q, max_new_tokens=16, sampling=s).token_ids == greedy.token_ids


def test_penalize_processor_on_known_logits(vlm):
    from cascade.vlm.logits import penalize

    d = vlm.backend.decoder
    (s,) = d.sequences(
        SamplingParams(repetition_penalty=2.0, presence_penalty=0.5, frequency_penalty=0.25), 8
    )
    s.generated.tokens[:] = [1, 1, 2]
    x = torch.zeros(1, 5)
    x[0, :3] = torch.tensor([4.0, 4.0, -4.0])
    out = penalize(x, [s])[0]
    assert out.tolist() == [4.0, 4.0 / 2 - 0.5 - 0.5, -4.0 * 2 - 0.5 - 0.25, 0.0, 0.0]


def test_max_tokens_in_the_settings_caps_each_completion(vlm, make_image):
    r = vlm.generate(
        [make_image(18)],
        Q,
        max_new_tokens=20,
        sampling=SamplingParams(max_tokens=3, n=2, seed=0, **HOT),
    )
    assert [len(c.token_ids) for c in r.completions] == [3, 3]
    assert {c.finish_reason for c in r.completions} == {"length"}


@pytest.mark.parametrize(
    "fields, where",
    [
        ({"temperature": -1}, "sampling.temperature"),
        ({"top_p": 0}, "sampling.top_p"),
        ({"top_k": -2}, "sampling.top_k"),
        ({"min_p": 1.5}, "sampling.min_p"),
        ({"n": 0}, "sampling.n"),
        ({"stop": [""]}, "sampling.stop"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "sampling.stop"),
        ({"stop_token_ids": [-1]}, "sampling.stop_token_ids"),
        ({"top_logprobs": 2}, "top_logprobs needs logprobs"),
        ({"top_logprobs": 21, "logprobs": True}, "sampling.top_logprobs"),
        ({"repetition_penalty": 0}, "sampling.repetition_penalty"),
        ({"presence_penalty": 3}, "sampling.presence_penalty"),
        ({"max_tokens": 0}, "sampling.max_tokens"),
        ({"temprature": 1}, "sampling.temprature"),
        ({"temperature": float("nan")}, "sampling.temperature"),
    ],
)
def test_settings_are_checked_naming_the_field(fields, where):
    with pytest.raises(ValidationError, match=where.split(".")[-1].split()[0]):
        SamplingParams(**fields)
    with pytest.raises(InputError, match=where.replace(".", r"\.")):
        sampling_params(fields)


def test_paths_that_decode_one_completion_refuse_n(vlm, make_image):
    img = make_image(19)
    with pytest.raises(InputError, match="sampling.n = 2: generate_batch"):
        vlm.generate_batch([([img], Q)], sampling=SamplingParams(n=2))
    with pytest.raises(InputError, match="sampling.n = 2: a session"):
        vlm.session([img]).ask(Q, sampling=SamplingParams(n=2))
    with pytest.raises(InputError, match="sampling: expected SamplingParams"):
        vlm.generate([img], Q, sampling="hot")
