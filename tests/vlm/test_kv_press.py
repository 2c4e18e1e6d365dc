"""KV presses on the tiny random-weight Qwen2-VL: identity at keep 1.0, what each press keeps,
sessions, the block cache, composition with visual-token reduction, and int4 prefix storage."""

import threading

import pytest
import torch

from cascade.errors import InputError
from cascade.vlm import VLM
from cascade.vlm.press import KVConfig, press_block
from cascade.vlm.reduction import ReductionConfig


def _load(tiny_path, kv=None, **kw):
    torch.set_num_threads(1)
    kw.setdefault("encoder_cache_bytes", 0)
    return VLM.load(str(tiny_path), device="cpu", kv=kv, **kw)


def _prefix(vlm, image, red=None):
    b = getattr(vlm, "backend", vlm)
    prefix_text, _ = b.layout.first_turn(1, None, "q")
    state, _, _ = b.engine.compute([image], prefix_text, red or ReductionConfig())
    return state


def _marked_layers(seq, heads=2, dim=8, layers=2):
    """Keys whose channel 0 holds the token's index, so the kept indices can be read back."""
    out = []
    for _ in range(layers):
        k = torch.randn(1, heads, seq, dim)
        k[..., 0] = torch.arange(seq, dtype=torch.float32)
        out.append((k, k.clone()))
    return out


@pytest.mark.parametrize("press", ["snapkv", "snapkv_visual", "random", "recency"])
def test_keep_one_is_the_unpressed_model_bit_for_bit(tiny_path, image, press, one_thread):
    base, pressed = _load(tiny_path), _load(tiny_path, {"press": press, "keep": 1.0})
    a, b = _prefix(base, image), _prefix(pressed, image)
    assert all(
        torch.equal(x, y)
        for la, lb in zip(a.layers, b.layers, strict=True)
        for x, y in zip(la, lb, strict=True)
    )
    ra = base.generate(image, "what is it?", max_new_tokens=6)
    rb = pressed.generate(image, "what is it?", max_new_tokens=6)
    assert ra.token_ids == rb.token_ids and ra.logprobs == rb.logprobs
    assert rb.bill.kv_bytes == rb.bill.kv_bytes_unpressed == ra.bill.kv_bytes


@pytest.mark.parametrize("press", ["snapkv_visual", "random", "recency"])
def test_visual_presses_keep_every_text_token(press):
    seq, visual = 40, torch.zeros(40, dtype=torch.bool)
    visual[5:35] = True
    layers = _marked_layers(seq)
    q = [(torch.randn(1, 4, 8, 8), 0.35) for _ in layers]
    out = press_block(KVConfig(press=press, keep=0.2), layers, visual, q)
    for k, _ in out:
        assert k.shape[2] == 10 + 6  # all 10 text tokens + round(0.2 * 30) visual
        for head in range(k.shape[1]):
            kept = k[0, head, :, 0].long()
            assert set(range(5)) | set(range(35, 40)) <= set(kept.tolist())
            assert torch.equal(kept, kept.sort().values)  # order kept


def test_snapkv_keeps_its_window_and_rates_every_other_token():
    seq = 50
    layers = _marked_layers(seq)
    q = [(torch.randn(1, 4, 8, 8), 0.35) for _ in layers]
    out = press_block(
        KVConfig(press="snapkv", keep=0.2, window=8), layers, torch.ones(seq, dtype=torch.bool), q
    )
    for k, _ in out:
        assert k.shape[2] == 8 + round(0.2 * 42)
        for head in range(2):
            assert set(range(42, 50)) <= set(k[0, head, :, 0].long().tolist())


def test_snapkv_keeps_what_the_window_attends_to():
    """A key the window's queries point at survives; with keep 0.1 most others go."""
    seq, d = 60, 8
    k = torch.randn(1, 1, seq, d) * 0.01
    k[0, 0, 17] = torch.tensor([5.0] + [0.0] * (d - 1))
    q = torch.zeros(1, 1, 4, d)
    q[..., 0] = 5.0
    out = press_block(
        KVConfig(press="snapkv_visual", keep=0.1, window=4),
        [(k, k)],
        torch.ones(seq, dtype=torch.bool),
        [(q, 1.0)],
    )
    kept = out[0][0][0, 0, :, 0]
    assert bool((kept == 5.0).any())


def test_press_shrinks_the_prefix_and_keeps_text(tiny_path, image):
    vlm = _load(tiny_path, {"press": "snapkv_visual", "keep": 0.2})
    state = _prefix(vlm, image)
    assert state.kv_tokens == state.text_tokens + round(0.2 * state.visual_tokens)
    r = vlm.generate(image, "what is it?", max_new_tokens=4)
    assert r.bill.kv_bytes < r.bill.kv_bytes_unpressed
    assert r.bill.kv_press == "snapkv_visual" and r.bill.kv_keep == 0.2
    per_token = vlm.backend.kv_token_bytes
    assert r.bill.kv_bytes_unpressed - r.bill.kv_bytes == per_token * (
        state.length - state.kv_tokens
    )


def test_a_later_session_turn_sees_the_pressed_cache(tiny_path, image):
    plain = _load(tiny_path).session(image)
    pressed = _load(tiny_path, {"press": "snapkv_visual", "keep": 0.2}).session(image)
    for s in (plain, pressed):
        s.ask("first?", max_new_tokens=3)
    dropped = plain._cache.get_seq_length() - pressed._cache.get_seq_length()
    state = _prefix(pressed.backend, image)
    assert dropped == state.length - state.kv_tokens > 0
    r = pressed.ask("second?", max_new_tokens=3)
    assert r.bill.cache == "session"
    assert r.bill.kv_bytes == pressed.kv_bytes < r.bill.kv_bytes_unpressed
    assert r.bill.kv_bytes_unpressed - r.bill.kv_bytes == dropped * pressed.backend.kv_token_bytes


def test_cached_pressed_blocks_give_the_tokens_of_a_cold_run_and_keys_hold_the_press(
    tiny_path, image, one_thread
):
    kv = {"press": "snapkv", "keep": 0.3}
    cold = _load(tiny_path, kv).generate(image, "what?", max_new_tokens=5)
    cached = _load(tiny_path, kv, kv_cache_bytes=64 << 20)
    first = cached.generate(image, "what?", max_new_tokens=5)
    again = cached.generate(image, "what?", max_new_tokens=5)
    assert first.bill.cache == "miss" and again.bill.cache == "hit"
    assert cold.token_ids == first.token_ids == again.token_ids
    assert again.bill.kv_bytes == first.bill.kv_bytes
    # another keep ratio on the same cache is another key: no hit on these blocks
    other = VLM.load(
        str(tiny_path),
        device="cpu",
        encoder_cache_bytes=0,
        kv_cache=cached.backend.kv_cache,
        kv={"press": "snapkv", "keep": 0.5},
    )
    assert other.generate(image, "what?", max_new_tokens=2).bill.cache == "miss"


def test_press_after_reduction(tiny_path, image):
    """Pruning before prefill, pressing after: the bill's visual tokens are the reduced ones and
    the press drops a share of those."""
    vlm = _load(tiny_path, {"press": "snapkv_visual", "keep": 0.5})
    red = ReductionConfig(method="pool", keep_ratio=0.5)
    state = _prefix(vlm, image, red)
    full = _prefix(_load(tiny_path), image)
    assert state.visual_tokens < full.visual_tokens
    assert state.kv_tokens == state.text_tokens + round(0.5 * state.visual_tokens)
    r = vlm.generate(image, "q?", max_new_tokens=3, reduction=red)
    assert r.bill.visual_tokens == state.visual_tokens


def test_concurrent_pressed_requests_decode_in_one_batch(tiny_path, make_image, one_thread):
    """Pressed caches join the continuous batch like any other (left-padded to the longest):
    each request's answer matches the one it gets alone, up to the batched attention's rounding
    (so compared by log-probabilities along the common prefix, as tests/vlm/test_batcher.py)."""
    vlm = _load(tiny_path, {"press": "snapkv", "keep": 0.3})
    images = [make_image(i, 90 + 30 * i, 120) for i in range(3)]
    alone = [vlm.generate(im, "what?", max_new_tokens=6) for im in images]
    out: list = [None] * 3
    vlm.backend.batcher.peak_rows = 0

    def ask(i):
        out[i] = vlm.generate(images[i], "what?", max_new_tokens=6)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, t in zip(alone, out, strict=True):
        assert t.token_ids[0] == a.token_ids[0] and t.bill.kv_bytes > 0
        n = next(
            (i for i, (x, y) in enumerate(zip(a.token_ids, t.token_ids, strict=False)) if x != y), 6
        )
        assert max(abs(x - y) for x, y in zip(a.logprobs[:n], t.logprobs[:n], strict=False)) < 1e-4


def test_streaming_with_a_press_yields_the_answer(tiny_path, image):
    vlm = _load(tiny_path, {"press": "recency", "keep": 0.5})
    events = []
    r = vlm.generate(image, "what?", max_new_tokens=4, on_token=events.append)
    assert [e.token_id for e in events] == list(r.token_ids)


def test_paths_that_cannot_press_say_so(tiny_path, image):
    vlm = _load(tiny_path, {"press": "snapkv", "keep": 0.5})
    with pytest.raises(InputError, match="press"):
        vlm.generate(image, "q", reduction=ReductionConfig(method="fastv", keep_ratio=0.5))
    with pytest.raises(InputError, match="press"):
        vlm.generate_batch([(image, "q")])
    with pytest.raises(InputError, match="unknown KV press"):
        _load(tiny_path, {"press": "snapk"})


def test_int4_prefix_cache_is_smaller_and_close(tiny_path, image, one_thread):
    sizes, firsts = {}, {}
    for dtype in ("auto", "int4"):
        vlm = _load(
            tiny_path, {"dtype": dtype, "group_size": 8, "residual": 0}, kv_cache_bytes=64 << 20
        )
        vlm.generate(image, "what?", max_new_tokens=2)
        hit = vlm.generate(image, "what?", max_new_tokens=2)
        assert hit.bill.cache == "hit"
        sizes[dtype] = vlm.backend.kv_cache.bytes
        firsts[dtype] = hit.logprobs[0]
    # fp32 KV, head_dim 16, groups of 8: 1 byte per element against 4 (+ the ids each block keeps)
    assert sizes["int4"] < 0.3 * sizes["auto"]
    assert abs(firsts["int4"] - firsts["auto"]) < 0.5


@pytest.mark.parametrize("family", ["tiny_path_qwen3", "tiny_path_idefics3", "tiny_path_25"])
def test_the_other_families_press_their_prefix(request, family, image, one_thread):
    """Qwen3-VL (query norm, DeepStack), Idefics3 (1-D RoPE) and Qwen2.5-VL: the window queries
    are captured through each family's own attention, keep 1.0 is exact, keep 0.3 shrinks."""
    path = request.getfixturevalue(family)
    base = _load(path).generate(image, "what?", max_new_tokens=4)
    same = _load(path, {"press": "snapkv", "keep": 1.0}).generate(image, "what?", max_new_tokens=4)
    pressed = _load(path, {"press": "snapkv", "keep": 0.3}).generate(
        image, "what?", max_new_tokens=4
    )
    assert same.token_ids == base.token_ids and same.logprobs == base.logprobs
    assert pressed.bill.kv_bytes < 0.7 * base.bill.kv_bytes


def test_kv_occupancy_counts_the_prefix_caches(tiny_path, image):
    from cascade.vlm.kv_memory import kv_occupancy

    vlm = _load(tiny_path, {"press": "snapkv_visual", "keep": 0.2}, kv_cache_bytes=64 << 20)
    vlm.generate(image, "what?", max_new_tokens=2)
    held = vlm.backend.kv_cache.bytes
    assert held > 0 and kv_occupancy()["prefix_cache"] >= held  # others may be live too
    assert kv_occupancy()["decoding"] >= 0
