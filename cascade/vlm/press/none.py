"""The identity press: every token stays (the default)."""

from __future__ import annotations

from .base import Press, register_press


@register_press("none")
class NoPress(Press):
    pass
