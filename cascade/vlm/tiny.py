"""Tiny Qwen2-VL / Qwen2.5-VL / Idefics3 (SmolVLM) models with random weights, built offline.

Model hubs are unreachable where this project is tested, so tests, benchmarks, notebooks and the
demo use real *architectures* (vision tower, patch merger or pixel-shuffle connector, the family's
language model, chat template, byte-level BPE tokenizer with the family's special tokens, image
processor) with **random weights**: every cost, token count and
timing is real for the architecture, the generated answers are noise. The result is an ordinary
checkpoint folder, loaded the normal way::

    path = build_tiny_vlm(tmp_dir, family="qwen2_vl", size="test")
    AutoProcessor.from_pretrained(path); AutoModelForImageTextToText.from_pretrained(path)

Built folders are cached (`~/.cache/vlm-cascade/tiny/<family>-<size>-s<seed>` by default, or under
the `out_dir` you pass), so a repeated call is a directory check.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Literal

from ..errors import InputError

__all__ = ["build_tiny_vlm", "default_tiny_dir", "TINY_FAMILIES", "TINY_SIZES"]

TINY_FAMILIES = ("qwen2_vl", "qwen2_5_vl", "idefics3")
TINY_SIZES = ("test", "bench")
# Bump when the recipe changes, so stale cached folders are rebuilt rather than trusted.
_RECIPE_VERSION = 1

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>",
                  "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]

# Qwen2-VL's own chat template (images as <|vision_start|><|image_pad|><|vision_end|> parts, a
# default system prompt), trimmed of tool calling, which the tiny models never need.
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Idefics3 / SmolVLM: `<image>` placeholders inside `<fake_token_around_image>`, one `<row_i_col_j>`
# tag per tile of a split image and `<global-img>` before the downscaled whole image (the processor
# looks up all 36 row/col tags), `<end_of_utterance>` ends every turn.
IDEFICS3_SPECIAL_TOKENS = (["<|endoftext|>", "<|im_start|>", "<end_of_utterance>", "<image>",
                            "<fake_token_around_image>", "<global-img>"]
                           + [f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)])

# SmolVLM-Instruct's own chat template ("User:<image>question<end_of_utterance>\nAssistant:").
IDEFICS3_CHAT_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}"
    "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)

# Shapes. "test": a few M parameters, a forward in milliseconds on CPU. "bench": a ~200M-parameter
# language model (hidden 1024, 12 layers, GQA 16/4 heads) and a real-ish 8-block vision tower, so
# prefill cost scales like a small production VLM. mrope_section must sum to head_dim / 2.
# Idefics3 extras: tile (= vision image_size) and patch size, pixel-shuffle scale (tokens per tile
# = (tile / patch / scale)^2) and the longest edge images are resized to before splitting into
# tiles: "test" 64 px tiles of 16 tokens, up to 2x2 tiles + the global image; "bench" SmolVLM's
# 512 px tiles of 64 tokens, up to 3x3 + global.
_SHAPES = {
    "test": dict(
        vocab=640, hidden=64, layers=2, heads=4, kv_heads=2, inter=128, mrope=[4, 2, 2],
        v_embed=32, v_depth=2, v_heads=2, v_inter=64,
        min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 64,
        tile=64, patch=8, scale=2, longest_edge=128),
    "bench": dict(
        vocab=8192, hidden=1024, layers=12, heads=16, kv_heads=4, inter=4096, mrope=[16, 8, 8],
        v_embed=384, v_depth=8, v_heads=6, v_inter=1536,
        min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 1280,
        tile=512, patch=16, scale=4, longest_edge=1536),
}


def default_tiny_dir() -> Path:
    """Where built tiny models are cached: $VLM_CASCADE_CACHE/tiny or ~/.cache/vlm-cascade/tiny."""
    root = os.environ.get("VLM_CASCADE_CACHE") or Path.home() / ".cache" / "vlm-cascade"
    return Path(root) / "tiny"


def _training_text() -> list[str]:
    """A deterministic English corpus from the standard library's docstrings (no downloads)."""
    import argparse, collections, json as _json, logging, pathlib, textwrap, unittest  # noqa: E401

    docs = []
    for mod in (argparse, collections, _json, logging, pathlib, textwrap, unittest):
        for name in sorted(dir(mod)):
            doc = getattr(getattr(mod, name, None), "__doc__", None)
            if isinstance(doc, str):
                docs.append(doc)
    docs += ["What is in the picture? Describe the image. How many people are there? "
             "What colour is the bus? Read the text on the sign. Where is the cat?"] * 20
    return docs


def _train_tokenizer(vocab_size: int, special: list[str], eos: str, template: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(_training_text(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos,
                                   pad_token="<|endoftext|>", unk_token=None,
                                   additional_special_tokens=special[1:])
    fast.chat_template = template
    fast.model_max_length = 32768
    return fast


def _idefics3_config(s: dict, tok):
    from transformers import Idefics3Config

    ids = {t: tok.convert_tokens_to_ids(t) for t in IDEFICS3_SPECIAL_TOKENS}
    text = dict(model_type="llama", vocab_size=len(tok), hidden_size=s["hidden"],
                intermediate_size=s["inter"], num_hidden_layers=s["layers"],
                num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"],
                max_position_embeddings=16384, rms_norm_eps=1e-5,
                rope_parameters={"rope_type": "default", "rope_theta": 100_000.0},
                bos_token_id=ids["<|im_start|>"], eos_token_id=ids["<end_of_utterance>"],
                pad_token_id=ids["<|endoftext|>"], tie_word_embeddings=False)
    vision = dict(hidden_size=s["v_embed"], intermediate_size=s["v_inter"],
                  num_hidden_layers=s["v_depth"], num_attention_heads=s["v_heads"],
                  image_size=s["tile"], patch_size=s["patch"])
    return Idefics3Config(text_config=text, vision_config=vision, scale_factor=s["scale"],
                          image_token_id=ids["<image>"], pad_token_id=ids["<|endoftext|>"],
                          tie_word_embeddings=False)


def _idefics3_processor(s: dict, tok):
    from transformers import Idefics3ImageProcessor, Idefics3Processor

    image_processor = Idefics3ImageProcessor(size={"longest_edge": s["longest_edge"]},
                                             max_image_size={"longest_edge": s["tile"]})
    seq_len = (s["tile"] // s["patch"] // s["scale"]) ** 2
    return Idefics3Processor(image_processor=image_processor, tokenizer=tok, image_seq_len=seq_len,
                             chat_template=IDEFICS3_CHAT_TEMPLATE)


def _qwen_processor(family: str, s: dict, tok):
    from transformers import (Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLProcessor,
                              Qwen2VLVideoProcessor)

    image_processor = Qwen2VLImageProcessor(min_pixels=s["min_pixels"], max_pixels=s["max_pixels"])
    # The processor insists on a video processor; videos reach the runtime as frames (images).
    video_processor = Qwen2VLVideoProcessor(min_pixels=s["min_pixels"], max_pixels=s["max_pixels"])
    processor_cls = Qwen2VLProcessor if family == "qwen2_vl" else Qwen2_5_VLProcessor
    return processor_cls(image_processor=image_processor, tokenizer=tok,
                         video_processor=video_processor, chat_template=CHAT_TEMPLATE)


def _config(family: str, s: dict, tok):
    if family == "idefics3":
        return _idefics3_config(s, tok)
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text = dict(vocab_size=len(tok), hidden_size=s["hidden"], intermediate_size=s["inter"],
                num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
                num_key_value_heads=s["kv_heads"], max_position_embeddings=32768,
                rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0,
                                 "mrope_section": s["mrope"]},
                bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                pad_token_id=ids["<|endoftext|>"])
    common = dict(image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                  vision_start_token_id=ids["<|vision_start|>"],
                  vision_end_token_id=ids["<|vision_end|>"], tie_word_embeddings=False)
    if family == "qwen2_vl":
        from transformers import Qwen2VLConfig

        vision = dict(depth=s["v_depth"], embed_dim=s["v_embed"], hidden_size=s["hidden"],
                      num_heads=s["v_heads"], mlp_ratio=s["v_inter"] // s["v_embed"])
        return Qwen2VLConfig(text_config=text, vision_config=vision, **common)
    from transformers import Qwen2_5_VLConfig

    depth = s["v_depth"]
    vision = dict(depth=depth, hidden_size=s["v_embed"], out_hidden_size=s["hidden"],
                  num_heads=s["v_heads"], intermediate_size=s["v_inter"], window_size=112,
                  fullatt_block_indexes=[i for i in range(depth) if i % 4 == 3] or [depth - 1])
    return Qwen2_5_VLConfig(text_config=text, vision_config=vision, **common)


def _is_built(path: Path) -> bool:
    stamp = path / "tiny_vlm.json"
    try:
        return json.loads(stamp.read_text()).get("recipe") == _RECIPE_VERSION
    except (OSError, ValueError):
        return False


def build_tiny_vlm(out_dir: str | Path | None = None,
                   family: Literal["qwen2_vl", "qwen2_5_vl", "idefics3"] = "qwen2_vl",
                   size: Literal["test", "bench"] = "test", seed: int = 0) -> Path:
    """Build (or reuse) a random-weight VLM checkpoint and return its folder.

    out_dir: parent folder of the cache (default `default_tiny_dir()`); the model lands in
    `<out_dir>/<family>-<size>-s<seed>`. The weights are random: answers are meaningless, while
    visual token counts, prefill/decode costs and timings are those of the real architecture.
    """
    if family not in TINY_FAMILIES:
        raise InputError(f"unknown tiny VLM family '{family}'; choose one of {list(TINY_FAMILIES)}")
    if size not in TINY_SIZES:
        raise InputError(f"unknown tiny VLM size '{size}'; choose one of {list(TINY_SIZES)}")
    target = Path(out_dir or default_tiny_dir()) / f"{family}-{size}-s{seed}"
    if _is_built(target):
        return target

    import torch
    from transformers import AutoModelForImageTextToText, GenerationConfig

    s = _SHAPES[size]
    if family == "idefics3":
        tok = _train_tokenizer(s["vocab"], IDEFICS3_SPECIAL_TOKENS, "<end_of_utterance>",
                               IDEFICS3_CHAT_TEMPLATE)
    else:
        tok = _train_tokenizer(s["vocab"], SPECIAL_TOKENS, "<|im_end|>", CHAT_TEMPLATE)
    config = _config(family, s, tok)
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config, dtype=torch.float32).eval()
    model.generation_config = GenerationConfig(
        do_sample=False, eos_token_id=config.text_config.eos_token_id,
        pad_token_id=config.text_config.pad_token_id, bos_token_id=config.text_config.bos_token_id)
    processor = (_idefics3_processor(s, tok) if family == "idefics3"
                 else _qwen_processor(family, s, tok))

    # Build in a sibling temp folder and rename, so a crash or a concurrent builder never leaves a
    # half-written folder that looks finished.
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        n_params = sum(p.numel() for p in model.parameters())
        (tmp / "tiny_vlm.json").write_text(json.dumps({
            "recipe": _RECIPE_VERSION, "family": family, "size": size, "seed": seed,
            "parameters": n_params, "weights": "random (answers are meaningless; costs are real)"}))
        if _is_built(target):  # another process finished first
            return target
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
