"""What stages do first with their `images` input: a list of cascade Images, bounded in pixels."""

from __future__ import annotations

import math
from typing import Any

from cascade.artifacts import Image
from cascade.errors import InputError

__all__ = ["as_image_list", "bound_pixels"]


def as_image_list(images: Any) -> list:
    """Stages take `images: list[Image] | Image`; inside they always work on a list."""
    items = [images] if isinstance(images, Image) else list(images or [])
    for i, im in enumerate(items):
        if not isinstance(im, Image):
            raise InputError(f"images[{i}] is {type(im).__name__}, expected a cascade Image")
    return items


def bound_pixels(images: list, min_pixels: int | None, max_pixels: int | None) -> list:
    """Each image scaled (aspect kept) into [min_pixels, max_pixels] pixels, as vLLM's
    `min_pixels` / `max_pixels` bound what a Qwen-VL model sees; in bounds, unchanged. The model's
    processor then applies its own limits and rounds to its patch grid."""
    out = []
    for im in images:
        n = im.width * im.height
        if max_pixels is not None and n > max_pixels:
            f = math.sqrt(max_pixels / n)
            im = im.resized(max(1, math.floor(im.width * f)), max(1, math.floor(im.height * f)))
        elif min_pixels is not None and n < min_pixels:
            f = math.sqrt(min_pixels / n)
            im = im.resized(math.ceil(im.width * f), math.ceil(im.height * f))
        out.append(im)
    return out
