"""PDF documents for tests, made here: rendered pages saved by PIL's PDF writer (one image per
page, at a stated resolution so a page's size in points is known)."""

from __future__ import annotations

import io

import numpy as np

INVOICE_TOTAL = "123.45"


def pdf_bytes(pages: list[np.ndarray], dpi: float = 144.0) -> bytes:
    """A PDF whose page n is the picture `pages[n]`, `dpi` pixels per inch (so rendering it back
    at `dpi` gives the pictures' own sizes)."""
    from PIL import Image

    images = [Image.fromarray(p) for p in pages]
    buf = io.BytesIO()
    images[0].save(buf, "PDF", save_all=True, append_images=images[1:], resolution=dpi)
    return buf.getvalue()


def invoice_pages() -> list[np.ndarray]:
    """A two-page invoice: the header on page 1, the line items and the total on page 2."""
    from cascade.eval.render import render_document

    font = "DejaVuSans.ttf"
    first = render_document(
        [
            [("ACME SUPPLY CO", 0.0, "left")],
            [("Invoice No", 0.0, "left"), ("INV-1001", 1.0, "right")],
            [("Date", 0.0, "left"), ("2024-03-05", 1.0, "right")],
        ],
        font,
        24,
        600,
    )
    second = render_document(
        [
            [("Widgets", 0.0, "left"), ("40.00", 1.0, "right")],
            [("Gears", 0.0, "left"), ("83.45", 1.0, "right")],
            [("-", 0.0, "left")],
            [("Total", 0.0, "left"), (INVOICE_TOTAL, 1.0, "right")],
        ],
        font,
        24,
        600,
    )
    return [first, second]
