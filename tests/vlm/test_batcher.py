"""Continuous batching: concurrent calls decode in one batch, each as it would alone."""

import threading
import time

import pytest

from cascade.decoding import SamplingParams
from cascade.vlm import VLM


@pytest.fixture(scope="module")
def vlm(tiny_path):
    """Its own model: the tests read its batcher's counters."""
    return VLM.load(str(tiny_path), device="cpu", encoder_cache_bytes=0, kv_cache_bytes=0)


def _hold_first_token(batcher, others: int):
    """An on_token that, on the first token, waits until `others` requests are prefilled and
    waiting: they then join this one's batch at the next step (no timing luck)."""

    def on_token(event):
        if event.index == 0:
            deadline = time.monotonic() + 60
            while batcher.waiting < others and time.monotonic() < deadline:
                time.sleep(0.005)

    return on_token


def _concurrently(calls):
    """Run the zero-argument calls in threads; their results (or exceptions) in order."""
    out = [None] * len(calls)

    def run(i):
        try:
            out[i] = calls[i]()
        except Exception as e:  # noqa: BLE001  returned for the test to check
            out[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
        time.sleep(0.02)  # the first call starts decoding first
    for t in threads:
        t.join(120)
    return out


def _requests(make_image):
    # prompts of different lengths (image sizes, questions) and answer lengths
    return [
        (
            [make_image(40 + i, 90 + 30 * i, 120 + 20 * i)],
            "What is this?" + " Be precise." * i,
            6 + 5 * i,
        )
        for i in range(4)
    ]


def test_concurrent_calls_decode_in_one_batch_with_their_own_tokens(vlm, make_image, one_thread):
    reqs = _requests(make_image)
    alone = [vlm.generate(ims, q, max_new_tokens=m) for ims, q, m in reqs]
    b = vlm.backend.batcher
    steps, b.peak_rows = b.steps, 0
    first = _hold_first_token(b, len(reqs) - 1)
    together = _concurrently(
        [
            lambda i=i: vlm.generate(
                reqs[i][0],
                reqs[i][1],
                max_new_tokens=reqs[i][2],
                on_token=first if i == 0 else None,
            )
            for i in range(len(reqs))
        ]
    )
    assert b.peak_rows == len(reqs)  # all four decoded in one step
    assert b.steps - steps < sum(len(r.token_ids) for r in alone)  # fewer steps than one by one
    for a, t in zip(alone, together, strict=True):
        assert (
            t.token_ids == a.token_ids and t.text == a.text and t.finish_reason == a.finish_reason
        )
        # padded, batched attention rounds differently: close, not bit-identical
        assert max(abs(x - y) for x, y in zip(a.logprobs, t.logprobs, strict=True)) < 1e-4
        assert t.bill.prompt_tokens == a.bill.prompt_tokens
        assert t.bill.generated_tokens == a.bill.generated_tokens


def test_a_call_alone_decodes_bit_identically_to_the_plain_loop(vlm, make_image, one_thread):
    """Alone in the batch, a call runs exactly the decoder's own loop (no mask, same ops)."""
    from cascade.vlm.decode import share_prefix

    be = vlm.backend
    ims, q = [make_image(60)], "Describe it."
    r = vlm.generate(ims, q, max_new_tokens=10)
    prefix, suffix = be.layout.first_turn(1, None, q)
    state, *_ = be.engine.state(ims, prefix, be.check_reduction(None))
    cache = be.engine.cache_of(state)
    ids = be.layout.tokenize(suffix)
    hidden = be.engine.prefill(cache, state.next_pos, ids)
    seqs = be.decoder.sequences(SamplingParams(), 10)
    (gen,) = be.decoder.run(
        share_prefix(hidden, cache, 1), cache, [state.next_pos + len(ids)], seqs
    )
    assert list(r.token_ids) == gen.tokens and list(r.logprobs) == gen.logprobs


def test_each_request_keeps_its_own_sampling_stop_and_n(vlm, make_image, one_thread):
    reqs = _requests(make_image)
    seeded = SamplingParams(temperature=0.9, top_k=40, seed=7, n=2)
    greedy_alone = vlm.generate(reqs[1][0], reqs[1][1], max_new_tokens=12)
    stop = greedy_alone.text[3:6]
    settings = [seeded, SamplingParams(stop=[stop]), SamplingParams(max_tokens=3)]
    alone = [
        vlm.generate(reqs[i][0], reqs[i][1], max_new_tokens=12, sampling=s)
        for i, s in enumerate(settings)
    ]
    b = vlm.backend.batcher
    b.peak_rows = 0
    first = _hold_first_token(b, len(settings) - 1)
    together = _concurrently(
        [
            lambda i=i: vlm.generate(
                reqs[i][0],
                reqs[i][1],
                max_new_tokens=12,
                sampling=settings[i],
                on_token=first if i == 0 else None,
            )
            for i in range(len(settings))
        ]
    )
    assert b.peak_rows == 4  # n = 2, and two more requests
    for a, t in zip(alone, together, strict=True):
        assert [c.token_ids for c in t.completions] == [c.token_ids for c in a.completions]
        assert [c.text for c in t.completions] == [c.text for c in a.completions]
    assert together[1].finish_reason == "stop" and stop not in together[1].text
    assert len(together[2].token_ids) == 3 and together[2].finish_reason == "length"


def test_a_cancelled_request_ends_alone(vlm, make_image, one_thread):
    """A request whose streaming callback raises (its client went away) fails with that error;
    the requests decoding beside it finish with their own tokens."""
    reqs = _requests(make_image)
    alone = [vlm.generate(ims, q, max_new_tokens=m) for ims, q, m in reqs[1:]]
    b = vlm.backend.batcher
    b.peak_rows = 0
    hold = _hold_first_token(b, len(reqs) - 1)

    class Gone(Exception):
        pass

    def cancelled(event):
        hold(event)
        if event.index == 2:
            raise Gone("the client went away")

    out = _concurrently(
        [lambda: vlm.generate(reqs[0][0], reqs[0][1], max_new_tokens=30, on_token=cancelled)]
        + [
            lambda i=i: vlm.generate(reqs[i][0], reqs[i][1], max_new_tokens=reqs[i][2])
            for i in range(1, len(reqs))
        ]
    )
    assert isinstance(out[0], Gone)
    assert b.peak_rows == len(reqs)
    for a, t in zip(alone, out[1:], strict=True):
        assert t.token_ids == a.token_ids
    assert vlm.generate(reqs[0][0], "Again?", max_new_tokens=4).token_ids  # the loop goes on


def test_generate_batch_joins_the_running_batch(vlm, make_image, one_thread):
    reqs = _requests(make_image)
    pairs = [(ims, q) for ims, q, _ in reqs[1:]]
    batch_alone = vlm.generate_batch(pairs, max_new_tokens=8)
    one_alone = vlm.generate(reqs[0][0], reqs[0][1], max_new_tokens=20)
    b = vlm.backend.batcher
    b.peak_rows = 0
    first = _hold_first_token(b, 1)
    one, batch = _concurrently(
        [
            lambda: vlm.generate(reqs[0][0], reqs[0][1], max_new_tokens=20, on_token=first),
            lambda: vlm.generate_batch(pairs, max_new_tokens=8),
        ]
    )
    assert b.peak_rows == 1 + len(pairs)
    assert one.token_ids == one_alone.token_ids
    assert [r.token_ids for r in batch] == [r.token_ids for r in batch_alone]


def test_a_request_wider_than_max_num_seqs_runs_alone(tiny_path, make_image, one_thread):
    small = VLM.load(
        str(tiny_path), device="cpu", encoder_cache_bytes=0, kv_cache_bytes=0, max_num_seqs=2
    )
    r = small.generate(
        [make_image(70)],
        "What?",
        max_new_tokens=4,
        sampling=SamplingParams(temperature=1.0, seed=1, n=3),
    )
    assert len(r.completions) == 3 and small.backend.batcher.peak_rows == 3
    with pytest.raises(Exception, match="max_num_seqs must be >= 1"):
        VLM.load(str(tiny_path), device="cpu", max_num_seqs=0)


def test_the_loop_thread_ends_when_idle_and_starts_again(tiny_path, make_image, monkeypatch):
    """An idle model holds no thread (so a released model can be freed); the next call starts
    one."""
    from cascade.vlm import batcher as batcher_module

    monkeypatch.setattr(batcher_module, "IDLE_EXIT_S", 0.05)
    m = VLM.load(str(tiny_path), device="cpu", encoder_cache_bytes=0, kv_cache_bytes=0)
    b = m.backend.batcher
    first = m.generate([make_image(80)], "What?", max_new_tokens=3)
    deadline = time.monotonic() + 10
    while b._thread is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert b._thread is None
    assert m.generate([make_image(80)], "What?", max_new_tokens=3).token_ids == first.token_ids


def test_close_ends_the_loop_and_refuses_new_calls(tiny_path, make_image):
    """What the process runs at exit (atexit): the thread ends while the interpreter is whole."""
    m = VLM.load(str(tiny_path), device="cpu", encoder_cache_bytes=0, kv_cache_bytes=0)
    b = m.backend.batcher
    m.generate([make_image(81)], "What?", max_new_tokens=2)
    thread = b._thread
    b.close()
    assert thread is None or not thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        m.generate([make_image(81)], "What?", max_new_tokens=2)
