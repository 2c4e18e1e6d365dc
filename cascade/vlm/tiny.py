"""Tiny VLMs with random weights, built offline from each family's recipe.

Model hubs are unreachable where this project is tested, so tests, benchmarks, notebooks and the
demo use real *architectures* (vision tower, patch merger or pixel-shuffle connector, the family's
language model, chat template, byte-level BPE tokenizer with the family's special tokens, image
processor) with **random weights**: every cost, token count and timing is real for the
architecture, the generated answers are noise. Each family's recipe lives in
`cascade.vlm.tiny_recipes` (`recipe(model_type, shape, tokenizer_for) -> (config, processor)`,
registered with `@register_tiny_recipe`); this module holds what they share (the shapes, the
tokenizer training, the build-and-cache). The result is an ordinary checkpoint folder, loaded the
normal way::

    path = build_tiny_vlm(tmp_dir, family="qwen3_vl", size="test")
    AutoProcessor.from_pretrained(path); AutoModelForImageTextToText.from_pretrained(path)

Built folders are cached (`~/.cache/vlm-cascade/tiny/<family>-<size>-s<seed>` by default, or under
the `out_dir` you pass), so a repeated call is a directory check.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import plugins
from ..cache import cache_dir
from ..errors import InputError, did_you_mean

__all__ = [
    "build_tiny_vlm",
    "default_tiny_dir",
    "tiny_families",
    "register_tiny_recipe",
    "TINY_SIZES",
    "Recipe",
]

Recipe = Callable[[str, dict[str, Any], Callable[..., Any]], tuple[Any, Any]]
"""`recipe(model_type, shape, tokenizer_for) -> (config, processor)` of a tiny checkpoint."""

TINY_SIZES = ("test", "bench")
# Bump when a recipe changes, so stale cached folders are rebuilt rather than trusted.
_RECIPE_VERSION = 1

# Shapes. "test": a few M parameters, a forward in milliseconds on CPU. "bench": a ~200M-parameter
# language model (hidden 1024, 12 layers, GQA 16/4 heads) and a real-ish 8-block vision tower, so
# prefill cost scales like a small production VLM. mrope_section must sum to head_dim / 2.
# Qwen image budgets in tokens per image (min_tokens..max_tokens). Idefics3 extras: tile
# (= vision image_size) and patch size, pixel-shuffle scale (tokens per tile =
# (tile / patch / scale)^2) and the longest edge images are resized to before splitting into
# tiles: "test" 64 px tiles of 16 tokens, up to 2x2 tiles + the global image; "bench" SmolVLM's
# 512 px tiles of 64 tokens, up to 3x3 + global. v_pos: Qwen3-VL's learned position grid (a square).
_SHAPES: dict[str, dict[str, Any]] = {  # per size: numbers, and mrope's sections
    "test": dict(
        vocab=640,
        hidden=64,
        layers=2,
        heads=4,
        kv_heads=2,
        inter=128,
        mrope=[4, 2, 2],
        v_embed=32,
        v_depth=2,
        v_heads=2,
        v_inter=64,
        v_pos=64,
        min_tokens=4,
        max_tokens=64,
        tile=64,
        patch=8,
        scale=2,
        longest_edge=128,
    ),
    "bench": dict(
        vocab=8192,
        hidden=1024,
        layers=12,
        heads=16,
        kv_heads=4,
        inter=4096,
        mrope=[16, 8, 8],
        v_embed=384,
        v_depth=8,
        v_heads=6,
        v_inter=1536,
        v_pos=2304,
        min_tokens=4,
        max_tokens=1280,
        tile=512,
        patch=16,
        scale=4,
        longest_edge=1536,
    ),
}


def register_tiny_recipe(*model_types: str) -> Callable[[Recipe], Recipe]:
    """Decorator: `recipe` builds tiny checkpoints of these model types."""

    def wrap(recipe: Recipe) -> Recipe:
        for model_type in model_types:
            plugins.tiny_recipes.register(model_type, recipe)
        return recipe

    return wrap


def tiny_families() -> dict[str, Recipe]:
    """Model type -> the recipe that builds a tiny checkpoint of it."""
    return dict(plugins.tiny_recipes.items())


def default_tiny_dir() -> Path:
    """Where built tiny models are cached: $VLM_CASCADE_CACHE/tiny or ~/.cache/vlm-cascade/tiny."""
    return cache_dir("tiny")


def _training_text() -> list[str]:
    """A deterministic English corpus from the standard library's docstrings (no downloads)."""
    import argparse  # noqa: E401
    import collections
    import json as _json
    import logging
    import pathlib
    import textwrap
    import unittest

    docs = []
    for mod in (argparse, collections, _json, logging, pathlib, textwrap, unittest):
        for name in sorted(dir(mod)):
            doc = getattr(getattr(mod, name, None), "__doc__", None)
            if isinstance(doc, str):
                docs.append(doc)
    docs += [
        "What is in the picture? Describe the image. How many people are there? "
        "What colour is the bus? Read the text on the sign. Where is the cat?"
    ] * 20
    return docs


def _train_tokenizer(vocab_size: int, special: list[str], eos: str, template: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_training_text(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=eos,
        pad_token="<|endoftext|>",
        unk_token=None,
        additional_special_tokens=special[1:],
    )
    fast.chat_template = template
    fast.model_max_length = 32768
    return fast


def _is_built(path: Path) -> bool:
    stamp = path / "tiny_vlm.json"
    try:
        return json.loads(stamp.read_text()).get("recipe") == _RECIPE_VERSION
    except (OSError, ValueError):
        return False


def build_tiny_vlm(
    out_dir: str | Path | None = None, family: str = "qwen2_vl", size: str = "test", seed: int = 0
) -> Path:
    """Build (or reuse) a random-weight VLM checkpoint and return its folder.

    family: a model type with a tiny recipe (`tiny_families()`: qwen2_vl, qwen2_5_vl, qwen3_vl,
    idefics3). out_dir: parent folder of the cache (default `default_tiny_dir()`); the model lands
    in `<out_dir>/<family>-<size>-s<seed>`. The weights are random: answers are meaningless, while
    visual token counts, prefill/decode costs and timings are those of the real architecture.
    """
    recipes = tiny_families()
    if family not in recipes:
        raise InputError(
            f"unknown tiny VLM family '{family}'{did_you_mean(family, recipes)}; "
            f"choose one of {sorted(recipes)}"
        )
    if size not in TINY_SIZES:
        raise InputError(f"unknown tiny VLM size '{size}'; choose one of {list(TINY_SIZES)}")
    target = Path(out_dir or default_tiny_dir()) / f"{family}-{size}-s{seed}"
    if _is_built(target):
        return target

    import torch
    from transformers import AutoModelForImageTextToText, GenerationConfig

    s = _SHAPES[size]
    config, processor = recipes[family](
        family,
        s,
        lambda special, eos, template: _train_tokenizer(s["vocab"], special, eos, template),
    )
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config, dtype=torch.float32).eval()
    model.generation_config = GenerationConfig(
        do_sample=False,
        eos_token_id=config.text_config.eos_token_id,
        pad_token_id=config.text_config.pad_token_id,
        bos_token_id=config.text_config.bos_token_id,
    )

    # Build in a sibling temp folder and rename, so a crash or a concurrent builder never leaves a
    # half-written folder that looks finished.
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        n_params = sum(p.numel() for p in model.parameters())
        (tmp / "tiny_vlm.json").write_text(
            json.dumps(
                {
                    "recipe": _RECIPE_VERSION,
                    "family": family,
                    "size": size,
                    "seed": seed,
                    "parameters": n_params,
                    "weights": "random (answers are meaningless; costs are real)",
                }
            )
        )
        if _is_built(target):  # another process finished first
            return target
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
