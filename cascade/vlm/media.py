"""Turn what users pass as images (artifacts, PIL images, arrays, paths) into `Image` artifacts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..artifacts import Image
from ..errors import InputError
from ..media import load_image


def as_images(images: Any) -> list[Image]:
    """One image or a list of them (anything `cascade.media.load_image` takes) -> `Image`s.
    `Image`s pass through unchanged: their `media_index` says which input they came from."""
    if images is None:
        return []
    if isinstance(images, (Image, str, Path, bytes, np.ndarray)) or type(
        images
    ).__module__.startswith("PIL."):
        images = [images]
    if not isinstance(images, Sequence):
        raise InputError(f"images must be a list of images, got {type(images).__name__}")
    return [im if isinstance(im, Image) else load_image(im, i) for i, im in enumerate(images)]
