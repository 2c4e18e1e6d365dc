"""Tiny Qwen2-VL / Qwen2.5-VL models with random weights, built offline from a config.

Model hubs are unreachable where this project is tested, so tests, benchmarks, notebooks and the
demo use real *architectures* (vision tower, patch merger, M-RoPE language model, chat template,
byte-level BPE tokenizer, image processor) with **random weights**: every cost, token count and
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

TINY_FAMILIES = ("qwen2_vl", "qwen2_5_vl")
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

# Shapes. "test": a few M parameters, a forward in milliseconds on CPU. "bench": a ~200M-parameter
# language model (hidden 1024, 12 layers, GQA 16/4 heads) and a real-ish 8-block vision tower, so
# prefill cost scales like a small production VLM. mrope_section must sum to head_dim / 2.
_SHAPES = {
    "test": dict(
        vocab=640, hidden=64, layers=2, heads=4, kv_heads=2, inter=128, mrope=[4, 2, 2],
        v_embed=32, v_depth=2, v_heads=2, v_inter=64,
        min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 64),
    "bench": dict(
        vocab=8192, hidden=1024, layers=12, heads=16, kv_heads=4, inter=4096, mrope=[16, 8, 8],
        v_embed=384, v_depth=8, v_heads=6, v_inter=1536,
        min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 1280),
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


def _train_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(_training_text(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token=None,
                                   additional_special_tokens=SPECIAL_TOKENS[1:])
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = 32768
    return fast


def _config(family: str, s: dict, tok):
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
                   family: Literal["qwen2_vl", "qwen2_5_vl"] = "qwen2_vl",
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
    from transformers import (AutoModelForImageTextToText, GenerationConfig,
                              Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLProcessor,
                              Qwen2VLVideoProcessor)

    s = _SHAPES[size]
    tok = _train_tokenizer(s["vocab"])
    config = _config(family, s, tok)
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config, dtype=torch.float32).eval()
    model.generation_config = GenerationConfig(
        do_sample=False, eos_token_id=config.text_config.eos_token_id,
        pad_token_id=config.text_config.pad_token_id, bos_token_id=config.text_config.bos_token_id)
    image_processor = Qwen2VLImageProcessor(min_pixels=s["min_pixels"], max_pixels=s["max_pixels"])
    # The processor insists on a video processor; videos reach the runtime as frames (images).
    video_processor = Qwen2VLVideoProcessor(min_pixels=s["min_pixels"], max_pixels=s["max_pixels"])
    processor_cls = Qwen2VLProcessor if family == "qwen2_vl" else Qwen2_5_VLProcessor
    processor = processor_cls(image_processor=image_processor, tokenizer=tok,
                              video_processor=video_processor, chat_template=CHAT_TEMPLATE)

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
