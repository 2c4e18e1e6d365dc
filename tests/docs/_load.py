"""Load a script of docs/ (the diagram, the build hooks) as a module, by its path: docs/ is no
package, and the repository root must stay off sys.path (its kernels/ folder would shadow the
`kernels` package transformers imports)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load(relpath: str) -> ModuleType:
    """The module at ROOT/relpath, imported once under a private name."""
    name = "_docs_" + relpath.replace("/", "_").removesuffix(".py")
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / relpath)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
