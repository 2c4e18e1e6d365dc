"""Rendered text with known content: plain text images, signs, captions, rows of a document, and
`Overlay`, which pastes any of them onto a photo or a video frame."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..artifacts import Box
from .fonts import font_path, load_font


def render_text_image(
    text: str,
    font_size: int = 32,
    padding: int = 16,
    size: tuple[int, int] | None = None,
    bold: bool = False,
    background: tuple[int, int, int] = (255, 255, 255),
    color: tuple[int, int, int] = (0, 0, 0),
) -> np.ndarray:
    """Black text on white (uint8 HxWx3); `size=(w, h)` fixes the canvas, else it fits the text."""
    from PIL import Image as PILImage
    from PIL import ImageDraw, ImageFont

    font = ImageFont.truetype(font_path(bold), font_size)
    x0, y0, x1, y1 = ImageDraw.Draw(PILImage.new("RGB", (1, 1))).textbbox((0, 0), text, font=font)
    w, h = size or (int(x1 - x0) + 2 * padding, int(y1 - y0) + 2 * padding)
    canvas = PILImage.new("RGB", (w, h), background)
    ImageDraw.Draw(canvas).text((padding - x0, padding - y0), text, font=font, fill=color)
    return np.asarray(canvas)


def render_sign(
    text: str,
    font: str,
    size: int,
    plate: tuple[int, int, int] = (255, 255, 255),
    ink: tuple[int, int, int] = (0, 0, 0),
    border: int = 2,
    pad: int | None = None,
) -> np.ndarray:
    """A sign: `text` (lines split on '\\n') at `size` px in font file `font` on a plate with a
    border; the plate is only a little larger than the text (`pad`, default size / 3), as on real
    signs; a banner passes a larger `pad`."""
    from PIL import Image as PILImage
    from PIL import ImageDraw

    f = load_font(font, size)
    draw = ImageDraw.Draw(PILImage.new("RGB", (1, 1)))
    x0, y0, x1, y1 = draw.multiline_textbbox(
        (0, 0), text, font=f, spacing=size // 4, align="center"
    )
    pad = max(3, size // 3) if pad is None else pad
    w, h = int(x1 - x0) + 2 * pad + 2 * border, int(y1 - y0) + 2 * pad + 2 * border
    canvas = PILImage.new("RGB", (w, h), ink)
    d = ImageDraw.Draw(canvas)
    d.rectangle([border, border, w - 1 - border, h - 1 - border], fill=plate)
    d.multiline_text(
        (pad + border - x0, pad + border - y0),
        text,
        font=f,
        fill=ink,
        spacing=size // 4,
        align="center",
    )
    return np.asarray(canvas)


def render_caption(
    text: str, font: str, size: int, fill: tuple[int, int, int] = (255, 255, 255)
) -> tuple[np.ndarray, np.ndarray]:
    """Overlay text with a dark outline and no plate (a watermark, a timestamp, a subtitle):
    (RGB pixels, alpha mask in [0, 1]) to blend onto footage."""
    from PIL import Image as PILImage
    from PIL import ImageDraw

    f = load_font(font, size)
    stroke = max(1, size // 10)
    x0, y0, x1, y1 = ImageDraw.Draw(PILImage.new("L", (1, 1))).textbbox(
        (0, 0), text, font=f, stroke_width=stroke
    )
    w, h = int(x1 - x0) + 4, int(y1 - y0) + 4
    rgb, mask = PILImage.new("RGB", (w, h), (0, 0, 0)), PILImage.new("L", (w, h), 0)
    for img, color, outline in ((rgb, fill, (0, 0, 0)), (mask, 255, 255)):
        ImageDraw.Draw(img).text(
            (2 - x0, 2 - y0), text, font=f, fill=color, stroke_width=stroke, stroke_fill=outline
        )
    return np.asarray(rgb), np.asarray(mask, np.float32) / 255.0


@dataclass(frozen=True)
class Overlay:
    """Pixels pasted on frames of a video (or on an image) at (x, y), shown from t0 to t1 seconds;
    `alpha` (HxW in [0, 1]) blends them, None pastes them opaque."""

    pixels: np.ndarray
    x: int
    y: int
    t0: float = 0.0
    t1: float = float("inf")
    alpha: np.ndarray | None = None

    @property
    def box(self) -> Box:
        h, w = self.pixels.shape[:2]
        return Box(self.x, self.y, self.x + w, self.y + h)

    def paste(self, frame: np.ndarray) -> np.ndarray:
        h, w = self.pixels.shape[:2]
        region = frame[self.y : self.y + h, self.x : self.x + w]
        if self.alpha is None:
            region[:] = self.pixels
        else:
            a = self.alpha[..., None]
            region[:] = (a * self.pixels + (1 - a) * region).astype(np.uint8)
        return frame


def render_document(
    rows: list[list[tuple[str, float, str]]],
    font: str,
    size: int,
    width: int,
    margin: int = 40,
    spacing: float = 1.7,
    paper: tuple[int, int, int] = (255, 255, 255),
) -> np.ndarray:
    """A page (receipt, invoice, form) of text rows. Each row is a list of spans
    (text, x as a fraction of the text width, 'left' | 'right' | 'center'); a row of no spans is a
    blank line, a span of text '-' a rule across the page."""
    from PIL import Image as PILImage
    from PIL import ImageDraw

    f = load_font(font, size)
    step = int(size * spacing)
    page = PILImage.new("RGB", (width, 2 * margin + step * len(rows)), paper)
    draw = ImageDraw.Draw(page)
    inner = width - 2 * margin
    for r, row in enumerate(rows):
        y = margin + r * step
        for text, x, align in row:
            if text == "-":
                draw.line(
                    [(margin, y + size // 2), (width - margin, y + size // 2)],
                    fill=(90, 90, 90),
                    width=max(1, size // 12),
                )
                continue
            tw = draw.textlength(text, font=f)
            px = margin + x * inner - {"left": 0, "right": tw, "center": tw / 2}[align]
            draw.text((px, y), text, font=f, fill=(20, 20, 20))
    return np.asarray(page)
