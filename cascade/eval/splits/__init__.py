"""What each split is made of. The two splits share no seed, footage, photo, font, word, layout or
question phrasing (tests/eval/test_splits.py checks it), so a pipeline tuned on dev meets test as
a user's media: other fonts, other words, other layouts, other ways to ask."""

from __future__ import annotations

from .dev import DEV
from .spec import SplitSpec
from .test import TEST

SPECS: dict[str, SplitSpec] = {"dev": DEV, "test": TEST}

__all__ = ["SPECS", "SplitSpec", "spec_for"]


def spec_for(split: str) -> SplitSpec:
    if split not in SPECS:
        raise ValueError(f"unknown split '{split}': expected one of {', '.join(SPECS)}")
    return SPECS[split]
