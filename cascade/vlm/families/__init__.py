"""Model families the transformers backend supports, looked up by `config.model_type`."""
from __future__ import annotations

from ...errors import CascadeError
from .base import Family, ImageInputs, PrefixInputs
from .idefics3 import Idefics3Family
from .qwen2_vl import Qwen2VLFamily

FAMILIES: dict[str, type[Family]] = {t: cls for cls in (Qwen2VLFamily, Idefics3Family)
                                     for t in cls.model_types}


def family_for(model_type: str) -> type[Family]:
    """The family class for a model type; unsupported types list what is supported."""
    try:
        return FAMILIES[model_type]
    except KeyError:
        raise CascadeError(f"model type '{model_type}' is not supported by the transformers "
                           f"backend; supported model types: {sorted(FAMILIES)}") from None


__all__ = ["FAMILIES", "Family", "ImageInputs", "PrefixInputs", "family_for"]
