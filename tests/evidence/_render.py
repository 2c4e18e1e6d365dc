"""Media made in the tests: signs on plates pasted on a plain or photographic background."""

from __future__ import annotations

import numpy as np
from PIL import Image as PILImage
from PIL import ImageDraw, ImageFont

from cascade.artifacts import Frame, Image


def font(size: int, bold: bool = True) -> ImageFont.FreeTypeFont:
    from matplotlib import font_manager

    return ImageFont.truetype(
        font_manager.findfont(
            font_manager.FontProperties(family="DejaVu Sans", weight="bold" if bold else "normal")
        ),
        size,
    )


def sign(text: str, size: int, plate=(255, 255, 255), ink=(0, 0, 0)) -> np.ndarray:
    f = font(size)
    x0, y0, x1, y1 = ImageDraw.Draw(PILImage.new("RGB", (1, 1))).textbbox((0, 0), text, font=f)
    pad = max(4, size // 3)
    canvas = PILImage.new("RGB", (x1 - x0 + 2 * pad, y1 - y0 + 2 * pad), plate)
    ImageDraw.Draw(canvas).text((pad - x0, pad - y0), text, font=f, fill=ink)
    return np.asarray(canvas)


def scene(width: int = 960, height: int = 540, seed: int = 0) -> np.ndarray:
    """A textured background with no text (smooth gradients plus mild noise)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack(
        [
            90 + 60 * np.sin(x / 97.0),
            110 + 50 * np.cos(y / 71.0),
            100 + 40 * np.sin((x + y) / 131.0),
        ],
        -1,
    )
    return np.clip(base + rng.normal(0, 6, base.shape), 0, 255).astype(np.uint8)


def with_signs(
    signs: list[tuple[np.ndarray, int, int]],
    t: float | None = None,
    seed: int = 0,
    size: tuple[int, int] = (960, 540),
) -> Image:
    """A frame (t given) or an image with each (sign pixels, x, y) pasted on `scene()`."""
    px = scene(*size, seed=seed)
    for s, x, y in signs:
        px[y : y + s.shape[0], x : x + s.shape[1]] = s
    return Frame(px, source="test.mp4", timestamp=t) if t is not None else Image(px)


def page(
    rows: list[list[tuple[str, int]]], size: int = 22, width: int = 900, title: str | None = None
) -> np.ndarray:
    """A white page: an optional title, then rows of (text, x) at `size` px."""
    img = PILImage.new("RGB", (width, 120 + int(1.8 * size) * (len(rows) + 2)), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    y = 40
    if title:
        draw.text((40, y), title, font=font(int(size * 1.8)), fill=(0, 0, 0))
        y += int(size * 3.5)
    for row in rows:
        for text, x in row:
            draw.text((x, y), text, font=font(size, bold=False), fill=(0, 0, 0))
        y += int(size * 1.8)
    return np.asarray(img)
