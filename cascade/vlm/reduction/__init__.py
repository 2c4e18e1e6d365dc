"""Training-free visual token reduction: the per-call config, the method registry and the
built-in methods, one module each (`pool`, `divprune`, `visionzip`, `dart` after the tower;
`tower` and `evs` (frames against the frame before, vLLM's video_pruning_rate) before it; `fastv`
inside the LLM; `none`).

Every method except FastV sees only the image's own tokens, never the question, so the reduced
visual prefix (and its KV cache) is the same for every question about the same media; that is what
lets the prefix cache pay on turn 2. Question-dependent selection belongs upstream (retrieval,
tiles). FastV ranks visual tokens by the attention they get from the *last prompt token* inside
the LLM, so it depends on the question and is never cached.

All methods are attention-free, so the LLM keeps SDPA/FlashAttention. An after-tower method returns
the kept embeddings and, for each, the index of the original token whose M-RoPE position it takes:
positions are computed for the full sequence and the dropped columns removed, so a kept token sits
exactly where it sat in the unpruned model.

Adding a method is one module (here, or in any package that registers through the
`cascade.reductions` entry-point group): a `Reduction` subclass with `@register_reduction`.
"""

from ...plugins import import_submodules
from .base import (
    KeepRegions,
    Reduced,
    Reduction,
    ReductionConfig,
    ReductionName,
    Selection,
    Where,
    keep_count,
    reduce_tokens,
    reduction_method,
    reduction_names,
    register_reduction,
    unit_rows,
)
from .tower import evidence_units, tower_select

import_submodules(__name__, __path__)

__all__ = [
    "KeepRegions",
    "Reduced",
    "Reduction",
    "ReductionConfig",
    "ReductionName",
    "Selection",
    "Where",
    "keep_count",
    "reduce_tokens",
    "reduction_method",
    "reduction_names",
    "register_reduction",
    "evidence_units",
    "tower_select",
    "unit_rows",
]
