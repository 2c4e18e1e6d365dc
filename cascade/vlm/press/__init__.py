"""KV presses: after a block of the prefix is prefilled, keep the KV of the tokens that matter and
drop the rest (the kvpress API shape: a press and a keep ratio), for the whole decode and every
later turn. Built in: `snapkv` (the window's pooled attention, all tokens), `snapkv_visual` (the
same over visual tokens only; text always kept), and the baselines `random` and `recency`; `none`
keeps everything. A new press is one module with `@register_press` (or any package registering
through the `cascade.presses` entry-point group). See docs/kv.md.
"""

from ...plugins import import_submodules
from .base import KVConfig, Press, PressName, press_block, press_method, register_press

import_submodules(__name__, __path__)


def press_names() -> list[str]:
    """Registered presses, sorted."""
    from ... import plugins

    return plugins.presses.names()


__all__ = [
    "KVConfig",
    "Press",
    "PressName",
    "press_block",
    "press_method",
    "press_names",
    "register_press",
]
