import numpy as np
import pytest

from cascade.errors import CascadeError, InputError
from cascade.vlm import VLM, ReductionConfig


def test_no_image(vlm):
    with pytest.raises(InputError, match="at least one image"):
        vlm.generate([], "What is this?")


def test_placeholder_in_question(vlm, image):
    with pytest.raises(InputError, match="placeholder"):
        vlm.generate([image], "Look: <|image_pad|>")
    with pytest.raises(InputError, match="non-empty"):
        vlm.generate([image], "  ")


def test_corrupt_and_wrong_images(vlm, tmp_path):
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    with pytest.raises(InputError, match="cannot decode"):
        vlm.generate([bad], "What?")
    with pytest.raises(InputError, match="not found"):
        vlm.generate([tmp_path / "missing.jpg"], "What?")
    with pytest.raises(InputError, match="uint8"):
        vlm.generate([np.zeros((10, 10), dtype=np.float32)], "What?")
    with pytest.raises(InputError, match="expected an Image"):
        vlm.generate([42], "What?")


def test_unsupported_model_type_lists_supported(tmp_path):
    from transformers import LlamaConfig

    LlamaConfig(
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        vocab_size=64,
    ).save_pretrained(tmp_path)
    with pytest.raises(CascadeError, match=r"'llama' is not supported.*qwen2_5_vl.*qwen2_vl"):
        VLM.load(str(tmp_path), device="cpu")


def test_missing_model_and_unknown_backend(tmp_path):
    with pytest.raises(InputError, match="cannot load VLM"):
        VLM.load(str(tmp_path / "nothing-here"), device="cpu")
    with pytest.raises(InputError, match="did you mean 'openai'"):
        VLM.load("x", backend="opnai")


def test_prompt_longer_than_context(tiny_path, image):
    vlm = VLM.load(str(tiny_path), device="cpu", context_window=60)
    with pytest.raises(InputError, match="context window of 60"):
        vlm.generate([image], "What is this?", max_new_tokens=4)
    # a lower keep ratio makes it fit
    r = vlm.generate([image], "What?", max_new_tokens=2, reduction=ReductionConfig("pool", 0.1))
    assert r.bill.visual_tokens + r.bill.prompt_tokens + 2 <= 60


def test_fastv_layer_out_of_range(vlm, image):
    with pytest.raises(InputError, match=r"fastv_layer must be in \[1, 1\]"):
        vlm.generate([image], "q", reduction=ReductionConfig("fastv", 0.5, fastv_layer=2))
