"""`none`: every visual token reaches the LLM (the unreduced model)."""

from __future__ import annotations

from .base import Reduction, register_reduction


@register_reduction("none")
class KeepAll(Reduction):
    """Keep every token (keep_ratio must be 1.0)."""

    where = "none"
