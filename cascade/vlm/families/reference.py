"""The family of a checkpoint that is priced, never run: its own config when it can be read (a
local folder, the hub cache), else the reference config shipped beside this module.

Where the model hub is unreachable (tests, the offline mode) a random-weight stand-in runs in the
declared model's place; its costs are a tiny model's. A route priced on it would find every image
cheap. `pricing_family` gives the declared checkpoint's real shapes and image cost instead:
`reference/<owner>--<name>.json` holds the fields of its `config.json` and
`preprocessor_config.json` that decide them (layers, widths, vocabulary, tower, pixel budget).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import CascadeError, InputError
from .base import Family, ImageLimits, family_for, load_family

__all__ = ["pricing_family", "reference_ids"]

REFERENCE_DIR = Path(__file__).parent / "reference"


@dataclass(frozen=True)
class ConfigOnlyProcessor:
    """What a weightless family reads of a processor when it only prices images: the image
    processor (its pixel budget, patch and merge sizes); no tokenizer."""

    image_processor: Any
    tokenizer: Any = None


def _reference_file(model_id: str) -> Path:
    return REFERENCE_DIR / f"{model_id.replace('/', '--')}.json"


def reference_ids() -> list[str]:
    """Hub ids with a shipped reference config."""
    return sorted(json.loads(p.read_text())["id"] for p in REFERENCE_DIR.glob("*.json"))


def _reference_family(model_id: str, limits: ImageLimits) -> Family | None:
    path = _reference_file(model_id)
    if not path.is_file():
        return None
    from transformers import AutoConfig, Qwen2VLImageProcessor

    ref = json.loads(path.read_text())
    cfg = dict(ref["config"])
    config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    if config.model_type not in ("qwen2_vl", "qwen2_5_vl"):
        raise CascadeError(f"{path}: reference configs are Qwen2-VL family only for now")
    processor = ConfigOnlyProcessor(Qwen2VLImageProcessor(**ref["image_processor"]))
    return family_for(config.model_type)(config, processor, limits)


def pricing_family(source: str, limits: ImageLimits) -> Family:
    """The weightless family of `source` (hub id or folder) under `limits`, for pricing: read from
    its files when they are here, else from the shipped reference config of that hub id."""
    if not Path(source).is_dir():
        family = _reference_family(source, limits)
        if family is not None:
            return family
    try:
        return load_family(source, limits)
    except (CascadeError, OSError, ValueError) as e:
        raise InputError(
            f"cannot price '{source}': its config is not readable here ({e}) and no reference "
            f"config ships for it (shipped: {', '.join(reference_ids())})"
        ) from e
