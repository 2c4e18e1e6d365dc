"""Encode, prefill and decode apart (`cascade.vlm.disagg`), on three backends loaded from the same
tiny random-weight Qwen2-VL: the decode role answers with the tokens and logprobs of a colocated
run, runs no tower and no prefix prefill, receives only the blocks it lacks, and a pressed int4
prefix travels pressed and int4."""

from __future__ import annotations

import pytest
import torch

from cascade.errors import InputError
from cascade.vlm import VLM
from cascade.vlm.disagg import lacking, prefill, prefix_keys, receive
from cascade.vlm.reduction import ReductionConfig

Q = "What is written here?"


def _load(tiny_path, kv=None, cache=64 << 20):
    return VLM.load(str(tiny_path), device="cpu", kv=kv, kv_cache_bytes=cache)


def _disaggregated(tiny_path, image, question, kv=None):
    """encode -> prefill -> decode, each on its own backend; (result, shipment, decode VLM)."""
    embeds = _load(tiny_path, kv, cache=0).backend.image_embeds(image)  # the encode role
    pre, dec = _load(tiny_path, kv), _load(tiny_path, kv)
    need = lacking(dec.backend, prefix_keys(dec.backend, embeds, question))
    shipment = prefill(pre.backend, embeds, question, lacks=need)
    receive(dec.backend, shipment)
    return dec.generate(embeds, question, max_new_tokens=6), shipment, dec, embeds


def test_decode_role_answers_like_a_colocated_run_without_tower_or_prefix_prefill(
    tiny_path, image, one_thread
):
    colocated = _load(tiny_path).generate(image, Q, max_new_tokens=6)
    out, shipment, dec, _ = _disaggregated(tiny_path, image, Q)
    assert out.token_ids == colocated.token_ids
    assert torch.allclose(torch.tensor(out.logprobs), torch.tensor(colocated.logprobs), atol=1e-5)
    assert out.bill.cache == "hit" and dec.backend.vision_tower_calls == 0
    assert len(shipment.blocks) == len(shipment.keys) == 2  # the image's block, the text after it
    assert shipment.nbytes == sum(b.nbytes for b in shipment.blocks.values()) > 0


def test_a_decode_replica_receives_only_the_blocks_it_lacks(tiny_path, image, one_thread):
    _, _, dec, embeds = _disaggregated(tiny_path, image, Q)
    pre = _load(tiny_path)
    other = "And what colour is it?"  # the prefix never holds the question: nothing is missing
    need = lacking(dec.backend, prefix_keys(dec.backend, embeds, other))
    assert need == []
    shipment = prefill(pre.backend, embeds, other, lacks=need)
    assert shipment.blocks == {} and shipment.nbytes == 0
    assert dec.generate(embeds, other, max_new_tokens=2).bill.cache == "hit"


def test_what_is_pressed_and_int4_is_what_is_shipped(tiny_path, image, one_thread):
    kv = {"dtype": "int4", "press": "snapkv_visual", "keep": 0.25, "group_size": 8, "residual": 0}
    warm = _load(tiny_path, kv)
    warm.generate(image, Q, max_new_tokens=1)
    colocated = warm.generate(image, Q, max_new_tokens=6)  # answered from its stored blocks
    out, shipment, _, _ = _disaggregated(tiny_path, image, Q, kv)
    _, plain, _, _ = _disaggregated(tiny_path, image, Q)
    assert out.token_ids == colocated.token_ids
    assert all(b.quantized for b in shipment.blocks.values())
    assert shipment.nbytes < 0.25 * plain.nbytes  # pressed to a quarter, then 4 of 32 bits


def test_roles_that_cannot_ship_say_why(tiny_path, image):
    no_cache = _load(tiny_path, cache=0).backend
    with pytest.raises(InputError, match="needs a KV prefix cache"):
        prefill(no_cache, image, Q)
    with pytest.raises(InputError, match="FastV"):
        prefill(
            _load(tiny_path).backend,
            image,
            Q,
            reduction=ReductionConfig("fastv", 0.5, fastv_layer=1),
        )
    int4 = prefill(_load(tiny_path, {"dtype": "int4"}).backend, image, Q)
    with pytest.raises(InputError, match="declare one kv.dtype"):
        receive(_load(tiny_path).backend, int4)
