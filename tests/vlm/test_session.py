import pytest

from cascade.decoding import GREEDY
from cascade.errors import InputError
from cascade.vlm import VLM, ReductionConfig


def test_turn_two_runs_no_vision_tower(vlm, make_image):
    s = vlm.session([make_image(11)], max_new_tokens=6)
    r1 = s.ask("What is this?")
    assert s.vision_tower_calls == 1 and r1.bill.cache == "off"
    r2 = s.ask("And what colour is it?")
    r3 = s.ask("Why?")
    assert s.vision_tower_calls == 1 and r2.bill.cache == r3.bill.cache == "session"
    assert r2.bill.vision_s == 0.0
    # history is in context: the prompt grows by each turn's question and answer
    assert r3.bill.prompt_tokens > r2.bill.prompt_tokens > r1.bill.prompt_tokens
    assert r2.bill.computed_prefill_flops < r2.bill.prefill_flops / 2
    assert [q for q, _ in s.turns] == ["What is this?", "And what colour is it?", "Why?"]


def test_session_turn_equals_one_shot_prefill_of_the_same_context(vlm, make_image):
    """Incremental turns give the tokens of prefilling the whole conversation in one chunk."""
    b = vlm.backend
    img = make_image(12)
    s = vlm.session([img], max_new_tokens=5)
    r1 = s.ask("Describe it.")
    r2 = s.ask("Anything else?")
    prefix, suffix = b.layout.first_turn(1, None, "Describe it.")
    state, *_ = b.engine.compute([img], prefix, ReductionConfig())
    pending = [] if r1.token_ids[-1] in b.eos_ids else list(r1.token_ids[-1:])
    context = (
        b.layout.tokenize(suffix)
        + list(r1.token_ids[:-1])
        + pending
        + b.layout.tokenize(b.layout.next_turn(1, None, 1, "Anything else?"))
    )
    cache = b.engine.cache_of(state)
    hidden = b.engine.prefill(cache, state.next_pos, context)
    (gen,) = b.decoder.run(
        hidden, cache, [state.next_pos + len(context)], b.decoder.sequences(GREEDY, 5)
    )
    assert tuple(gen.tokens) == r2.token_ids


def test_session_uses_prefix_cache_and_rejects_fastv(tiny_path, make_image):
    vlm = VLM.load(str(tiny_path), device="cpu", kv_cache_bytes=16 << 20)
    img = make_image(13)
    vlm.generate([img], "warm the cache", max_new_tokens=1)
    s = vlm.session([img])
    assert s.ask("q", max_new_tokens=2).bill.cache == "hit" and s.vision_tower_calls == 0
    with pytest.raises(InputError, match="fastv"):
        vlm.session([img], reduction=ReductionConfig("fastv", 0.5))
    with pytest.raises(InputError, match="at least one image"):
        vlm.session([])
