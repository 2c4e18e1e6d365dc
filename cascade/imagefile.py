"""Image files and in-memory images -> RGB pixels (H x W x 3 uint8), with clear errors.

The decoding half of `cascade.media.load_image`, kept apart so `cascade.artifacts.Image.open`
can decode without the artifacts depending on the media module (which builds artifacts). Every
PIL mode is converted the same way (16-bit samples scaled, transparency flattened onto white),
only raster formats are opened, and sizes are checked from the header before pixels are decoded.
"""

from __future__ import annotations

import io
import sys
from typing import Any

import numpy as np

from .errors import InputError

__all__ = [
    "IMAGE_FORMATS",
    "ImageTooLarge",
    "check_size",
    "image_size",
    "rgb_pixels",
    "array_pixels",
    "decode_pixels",
    "pil_pixels",
]

# Raster formats Pillow decodes itself. Not EPS/PS (Pillow hands those to Ghostscript, i.e. runs a
# PostScript program) and nothing that needs a plugin installed at run time.
IMAGE_FORMATS = ("PNG", "JPEG", "MPO", "WEBP", "GIF", "BMP", "TIFF", "PPM", "TGA", "ICO", "AVIF")


class ImageTooLarge(InputError):
    """An image (or video frame) over a size limit, found from its header before decoding."""


def check_size(
    width: int, height: int, max_side: int, what: str, max_pixels: int | None = None
) -> None:
    if max(width, height) > max_side:
        raise ImageTooLarge(
            f"{what} is {width}x{height}, larger than max_side={max_side}; "
            "raise max_side if this is intended"
        )
    if max_pixels is not None and width * height > max_pixels:
        raise ImageTooLarge(
            f"{what} is {width}x{height} = {width * height:,} pixels, over the "
            f"limit of {max_pixels:,}"
        )


def _pil_open(fp: Any):
    """Pillow's own `Image.open`, limited to IMAGE_FORMATS.

    Ultralytics replaces `PIL.Image.open` with a wrapper that, when Pillow cannot identify a file,
    installs and registers pi-heif and tries again: an upload must never trigger an install, and
    the error it ends in ("No module named 'pi_heif'") says nothing about the file.
    """
    from PIL import Image as PILImage

    patches = sys.modules.get("ultralytics.utils.patches")
    opener = getattr(patches, "_image_open", None) or PILImage.open
    PILImage.init()
    return opener(fp, formats=[f for f in IMAGE_FORMATS if f in PILImage.OPEN])


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from an encoded image's header, no pixels decoded; None when it is not an
    image the raster decoders (IMAGE_FORMATS) read."""
    try:
        with _pil_open(io.BytesIO(data)) as im:
            return im.size
    except Exception:  # noqa: BLE001  decode_pixels says why, when it is asked to decode it
        return None


def _gray_to_8bit(a: np.ndarray, mode: str) -> np.ndarray:
    """16/32-bit integer or float samples -> uint8, scaled to their range instead of clipped."""
    a = np.nan_to_num(a.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    lo, hi = float(a.min()), float(a.max())
    top: float | None
    if mode.startswith("I;16"):
        top = 65535.0
    elif mode == "I":  # 32-bit ints: 8-bit or 16-bit samples in practice, else their own range
        top = 255.0 if lo >= 0 and hi <= 255 else 65535.0 if lo >= 0 and hi <= 65535 else None
    else:  # "F": [0, 1] is the float convention; anything else is shown over its own range
        top = 1.0 if lo >= 0 and hi <= 1 else None
    if top is None:
        a, top = a - lo, max(hi - lo, 1e-12)
    return np.clip(np.rint(a * (255.0 / top)), 0, 255).astype(np.uint8)


def rgb_pixels(im: Any) -> np.ndarray:
    """H x W x 3 uint8 RGB for a PIL image of any mode.

    16-bit (`I;16*`), 32-bit (`I`) and float (`F`) samples are scaled to 8 bits, not clipped
    (Pillow's own `convert("RGB")` turns a 16-bit scan white); alpha (`RGBA`, `LA`, `PA`, a
    palette or grey image with a transparent colour) is flattened onto white, the way a viewer
    shows it, so dark text on a transparent background stays readable; CMYK, YCbCr, LAB, HSV and
    1-bit go through Pillow's conversions.
    """
    from PIL import Image as PILImage

    mode = im.mode
    if mode.startswith("I") or mode == "F":
        gray = _gray_to_8bit(np.asarray(im), mode)
        return np.ascontiguousarray(np.repeat(gray[:, :, None], 3, axis=2))
    if "A" in mode or "a" in mode or "transparency" in im.info:
        rgba = im.convert("RGBA")
        flat = PILImage.new("RGBA", rgba.size, (255, 255, 255, 255))
        flat.alpha_composite(rgba)
        im = flat
    return np.ascontiguousarray(np.asarray(im.convert("RGB")))


def array_pixels(arr: np.ndarray, what: str) -> np.ndarray:
    if arr.dtype == np.uint8 and arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] not in (1, 3, 4):
        raise InputError(
            f"{what}: arrays must be uint8 HxW, HxWx3 or HxWx4; got {arr.dtype} {arr.shape}"
        )
    if arr.shape[2] == 4:
        from PIL import Image as PILImage

        return rgb_pixels(PILImage.fromarray(np.ascontiguousarray(arr), "RGBA"))
    if arr.shape[2] == 1:
        arr = np.repeat(arr, 3, axis=2)
    return np.ascontiguousarray(arr)


def decode_pixels(
    fp: Any, what: str, max_side: int = 16384, max_pixels: int | None = None
) -> np.ndarray:
    """Open, check the header size, decode, orient by EXIF, convert. Errors say why, not where."""
    from PIL import ImageOps, UnidentifiedImageError
    from PIL.Image import DecompressionBombError

    try:
        with _pil_open(fp) as im:
            width, height = im.size
            check_size(width, height, max_side, what, max_pixels)  # from the header: no pixels yet
            return rgb_pixels(ImageOps.exif_transpose(im))
    except ImageTooLarge:
        raise
    except DecompressionBombError as e:
        raise ImageTooLarge(f"{what} is too large to decode safely ({e})") from e
    except Exception as e:  # noqa: BLE001  decoders raise many types; never show a path or repr
        why = (
            "unknown or unsupported image format"
            if isinstance(e, UnidentifiedImageError)
            else "truncated or damaged image data"
            if isinstance(e, (OSError, SyntaxError, EOFError))
            else type(e).__name__
        )
        raise InputError(f"cannot decode {what}: not a readable image ({why})") from e


def pil_pixels(
    image: Any, what: str, max_side: int = 16384, max_pixels: int | None = None
) -> np.ndarray:
    """RGB pixels of a PIL image (size checked first); a lazily loaded image that turns out
    damaged raises InputError naming `what`."""
    width, height = image.size
    check_size(width, height, max_side, what, max_pixels)
    try:
        return rgb_pixels(image)
    except OSError as e:  # a lazily loaded PIL image decodes on first access
        raise InputError(
            f"cannot decode {what}: not a readable image (truncated or damaged image data)"
        ) from e
