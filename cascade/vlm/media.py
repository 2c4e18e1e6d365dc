"""Turn what users pass as images (artifacts, PIL images, arrays, paths) into `Image` artifacts."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..artifacts import Image
from ..errors import InputError


def as_image(obj: Any, index: int = 0) -> Image:
    """One image; corrupt files, wrong array shapes and unknown types raise `InputError`."""
    if isinstance(obj, Image):
        return obj
    if isinstance(obj, (str, Path)):
        return Image.open(obj, media_index=index)
    if isinstance(obj, np.ndarray):
        return Image(obj, media_index=index)
    if type(obj).__module__.startswith("PIL"):
        try:
            return Image.from_pil(obj, media_index=index)
        except OSError as e:  # truncated or undecodable data surfaces on first pixel access
            raise InputError(f"image {index} cannot be decoded: {e}") from e
    raise InputError(f"image {index}: expected an Image, PIL image, uint8 HxWx3 array or a path, "
                     f"got {type(obj).__name__}")


def as_images(images: Any) -> list[Image]:
    if images is None:
        return []
    if isinstance(images, (Image, str, Path, np.ndarray)) or type(images).__module__.startswith("PIL"):
        images = [images]
    if not isinstance(images, Sequence):
        raise InputError(f"images must be a list of images, got {type(images).__name__}")
    return [as_image(im, i) for i, im in enumerate(images)]
