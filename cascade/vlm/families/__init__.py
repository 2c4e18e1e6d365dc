"""Model families, looked up by `config.model_type`: every module here registers its own
(`@register_family`): a weightless `Family` (costs, limits, shapes) and its loaded `FamilyRuntime`.
Adding a family is adding a module (docs/architecture.md, "Add a family")."""

from __future__ import annotations

from ...plugins import import_submodules
from .base import (
    FAMILIES,
    Family,
    ImageCost,
    ImageLimits,
    ModelShapes,
    family_for,
    load_family,
    matmul_weights,
    register_family,
)
from .runtime import FamilyRuntime, ImageInputs, PrefixInputs

import_submodules(__name__, __path__)

__all__ = [
    "FAMILIES",
    "Family",
    "FamilyRuntime",
    "ImageCost",
    "ImageInputs",
    "ImageLimits",
    "ModelShapes",
    "PrefixInputs",
    "family_for",
    "load_family",
    "matmul_weights",
    "register_family",
]
