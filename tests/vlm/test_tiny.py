import json

import pytest

from cascade.errors import InputError
from cascade.vlm import build_tiny_vlm


@pytest.mark.parametrize("fixture", ["tiny_path", "tiny_path_25"])
def test_tiny_model_loads_the_normal_way(request, fixture):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    path = request.getfixturevalue(fixture)
    processor = AutoProcessor.from_pretrained(path)
    model = AutoModelForImageTextToText.from_pretrained(path)
    meta = json.loads((path / "tiny_vlm.json").read_text())
    assert model.config.model_type == meta["family"]
    assert "random" in meta["weights"]
    tok = processor.tokenizer
    for special in (
        "<|im_start|>",
        "<|im_end|>",
        "<|vision_start|>",
        "<|vision_end|>",
        "<|image_pad|>",
        "<|video_pad|>",
        "<|endoftext|>",
    ):
        ids = tok(special, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1 and ids[0] == tok.convert_tokens_to_ids(special)
    assert model.config.image_token_id == tok.convert_tokens_to_ids("<|image_pad|>")
    assert sum(p.numel() for p in model.parameters()) < 5_000_000


def test_build_is_cached_and_a_stale_recipe_is_rebuilt(tmp_path):
    path = build_tiny_vlm(tmp_path, family="qwen2_vl", size="test")
    weights = next(path.glob("*.safetensors"))
    built = weights.stat().st_mtime_ns
    assert build_tiny_vlm(tmp_path, family="qwen2_vl", size="test") == path
    assert weights.stat().st_mtime_ns == built  # reused, not rewritten
    stamp = path / "tiny_vlm.json"
    stamp.write_text(json.dumps({**json.loads(stamp.read_text()), "recipe": -1}))
    assert build_tiny_vlm(tmp_path, family="qwen2_vl", size="test") == path
    assert json.loads(stamp.read_text())["recipe"] != -1  # rebuilt under the current recipe


def test_every_registered_family_has_a_tiny_recipe():
    from cascade.vlm import FAMILIES, tiny_families

    assert set(tiny_families()) == set(FAMILIES) - {"smolvlm"}
    assert {"qwen2_vl", "qwen2_5_vl", "qwen3_vl", "idefics3"} <= set(tiny_families())


def test_build_rejects_unknown_family_and_size(tmp_path):
    with pytest.raises(InputError, match="did you mean 'qwen3_vl'"):
        build_tiny_vlm(tmp_path, family="qwen3vl")
    with pytest.raises(InputError, match="qwen2_vl"):
        build_tiny_vlm(tmp_path, family="llava")
    with pytest.raises(InputError, match="bench"):
        build_tiny_vlm(tmp_path, size="huge")
