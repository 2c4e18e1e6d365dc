"""Routers (import path `cascade.routers`): stages whose output picks a branch.

Every public module in this folder registers its routers on import; importing the package imports
them all, so adding a router is adding a file. Modules import heavy libraries (torch, PyAV, YOLO)
inside `setup()`/`run()`, never at module level, so listing and validating stay fast.
"""

from cascade.plugins import import_submodules

import_submodules(__name__, __path__)
