"""`text_edges`: how much text a page holds, the route's price of OCR, whatever the scan's dpi."""

from __future__ import annotations

from PIL import Image as PILImage
from PIL import ImageDraw, ImageFont

from cascade.artifacts import Image
from cascade.routers.image_stats import text_edges


def page(lines: int, scale: int = 1) -> Image:
    """A white page of `lines` lines of text, drawn at `scale` times the size (a higher dpi)."""
    im = PILImage.new("RGB", (800 * scale, 1000 * scale), "white")
    draw = ImageDraw.Draw(im)
    font = ImageFont.load_default(size=18 * scale)
    for i in range(lines):
        at = (40 * scale, (40 + 30 * i) * scale)
        draw.text(at, f"Line {i}: 2 x Coffee 3.50 EUR", "black", font)
    return Image.from_pil(im)


def test_text_edges_follow_the_text_not_the_pixels():
    blank, few, many = page(0), page(5), page(30)
    assert text_edges(blank) == 0.0
    assert 4 < text_edges(many) / text_edges(few) < 8  # six times the lines
    # the same page scanned at twice the resolution: four times the pixels, the same text
    assert abs(text_edges(page(30, scale=2)) / text_edges(many) - 1) < 0.35
