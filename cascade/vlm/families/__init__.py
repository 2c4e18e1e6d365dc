"""Model families, looked up by `config.model_type`: every module here registers its own
(`@register_family`); adding a family is adding a module (README: "Adding a model family")."""
from __future__ import annotations

from ...plugins import import_submodules
from .base import (FAMILIES, Family, ImageCost, ImageInputs, ImageLimits, ModelShapes, PrefixInputs,
                   family_for, load_family, register_family)

import_submodules(__name__, __path__)

__all__ = ["FAMILIES", "Family", "ImageCost", "ImageInputs", "ImageLimits", "ModelShapes",
           "PrefixInputs", "family_for", "load_family", "register_family"]
