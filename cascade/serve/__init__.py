"""Serving: an OpenAI-compatible HTTP server over cascade pipelines and a Gradio web demo.

Imports are lazy (the CLI imports this package to register `cascade serve` / `cascade demo`
without loading FastAPI or Gradio):

    from cascade.serve import ServeConfig, create_app
    app = create_app(ServeConfig(tiny=True), demo=True)
"""

from __future__ import annotations

from typing import Any

from .config import ServeConfig

__all__ = ["ServeConfig", "create_app", "Engine"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from .app import create_app

        return create_app
    if name == "Engine":
        from .engine import Engine

        return Engine
    raise AttributeError(name)
