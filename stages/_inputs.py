"""What every stage does first with its `images` input."""
from __future__ import annotations

from typing import Any

from cascade.artifacts import Image
from cascade.errors import InputError

__all__ = ["as_image_list"]


def as_image_list(images: Any) -> list:
    """Stages take `images: list[Image] | Image`; inside they always work on a list."""
    items = [images] if isinstance(images, Image) else list(images or [])
    for i, im in enumerate(items):
        if not isinstance(im, Image):
            raise InputError(f"images[{i}] is {type(im).__name__}, expected a cascade Image")
    return items
