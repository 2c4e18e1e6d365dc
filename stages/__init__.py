"""The stage library (import path `cascade.stages`).

Every public module in this folder registers its stages on import; importing the package imports
them all, so adding a stage is adding a file. Modules import heavy libraries (torch, PyAV, YOLO)
inside `setup()`/`run()`, never at module level, so listing and validating stay fast.
"""
import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")
