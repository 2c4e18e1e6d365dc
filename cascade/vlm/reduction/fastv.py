"""`fastv`: FastV drops the visual tokens the question ignores inside the LLM, after layer K
(`ReductionConfig.fastv_layer`); the runtime runs it (`cascade.vlm.fastv`). Its ranking depends on
the question, so its prefix is never cached."""

from __future__ import annotations

from .base import Reduction, register_reduction


@register_reduction("fastv")
class FastV(Reduction):
    """Drop visual tokens after decoder layer K by the last prompt token's attention."""

    where = "in_llm"
