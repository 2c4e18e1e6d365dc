"""PDF documents as page images: each page rendered with pypdfium2 (PDFium, Chrome's PDF engine)
at a chosen DPI, so OCR, layout and the VLM read a PDF page as they read a scanned one.

A page becomes an `Image` whose `source` names the document and the page ("report.pdf page 2")
and whose `media_index` is its position among the request's media, so the evidence and the OCR
lines of an answer say which page they came from. The page count is capped before anything is
rendered (`PdfTooLong`, naming the cap), and each page's pixel size is known from its size in
points before its pixels are made (`before_page` lets a caller charge a pixel budget first).

DPI: `DEFAULT_DPI` = 144 (2x PDF's 72 points per inch). A US-letter page becomes 1224 x 1584
pixels, where 9-10 pt body text is 18-20 pixels high: what the OCR model reads reliably, at a
quarter of the pixels of a 300-DPI scan. Pass `dpi` for small print.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .artifacts import Image
from .errors import InputError
from .imagefile import ImageTooLarge, pil_pixels

__all__ = ["DEFAULT_DPI", "MAX_PAGES", "PdfTooLong", "is_pdf", "render_pdf"]

DEFAULT_DPI = 144.0
MAX_PAGES = 32  # pages one document may have (the OCR of each page is the cost that grows)
_POINTS_PER_INCH = 72.0
# PDFium keeps global state and is not thread-safe; pypdfium2 leaves locking to the caller.
_PDFIUM = threading.Lock()


class PdfTooLong(InputError):
    """A document with more pages than the cap allows (the server answers 413)."""

    def __init__(self, name: str, pages: int, limit: int):
        super().__init__(
            f"{name} has {pages:,} pages, over the limit of {limit:,} pages per "
            "document; send the pages the question is about"
        )
        self.pages, self.limit = pages, limit


def is_pdf(data: bytes | Path | str) -> bool:
    """True when the bytes (or the file) start with a PDF header (`%PDF-`)."""
    if isinstance(data, (str, Path)):
        with open(data, "rb") as f:
            data = f.read(1024)
    # The header may follow a little garbage (PDF 1.7 section 7.5.2 tolerates 1 KiB of it).
    return b"%PDF-" in data[:1024]


def render_pdf(
    source: bytes | Path | str,
    *,
    name: str,
    dpi: float = DEFAULT_DPI,
    max_pages: int = MAX_PAGES,
    max_pixels: int | None = None,
    first_index: int = 0,
    before_page: Callable[[int, int, int], None] | None = None,
) -> list[Image]:
    """Every page of a PDF as an RGB `Image` at `dpi`, sources "<name> page <n>" (n from 1),
    media indexes from `first_index`.

    Raises `InputError` naming `name` for a file that is not a readable PDF (or is encrypted),
    `PdfTooLong` past `max_pages`, `ImageTooLarge` for a page over `max_pixels` at this DPI.
    `before_page(n, width, height)` is called before page n is rendered."""
    import pypdfium2 as pdfium

    if not dpi > 0:
        raise InputError(f"{name}: the DPI must be positive, got {dpi!r}")
    data = source if isinstance(source, bytes) else Path(source).read_bytes()
    scale = dpi / _POINTS_PER_INCH
    pages: list[Image] = []
    with _PDFIUM:
        try:
            doc = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as e:
            raise InputError(f"{name}: not a readable PDF ({_reason(e)})") from None
        try:
            count = len(doc)
            if count == 0:
                raise InputError(f"{name}: the PDF has no pages")
            if count > max_pages:
                raise PdfTooLong(name, count, max_pages)
            for i in range(count):
                page = doc[i]
                try:
                    w_pt, h_pt = page.get_size()
                    width, height = max(1, round(w_pt * scale)), max(1, round(h_pt * scale))
                    what = f"{name} page {i + 1}"
                    if max_pixels is not None and width * height > max_pixels:
                        raise ImageTooLarge(
                            f"{what} is {width}x{height} pixels at {dpi:g} DPI "
                            f"({width * height:,}), over the limit of "
                            f"{max_pixels:,} pixels"
                        )
                    if before_page is not None:
                        before_page(i + 1, width, height)
                    bitmap = page.render(scale=scale)
                    try:
                        pixels = pil_pixels(bitmap.to_pil(), what)
                    finally:
                        bitmap.close()
                finally:
                    page.close()
                pages.append(
                    Image(np.ascontiguousarray(pixels), source=what, media_index=first_index + i)
                )
        finally:
            doc.close()
    return pages


def _reason(e: Exception) -> str:
    """PDFium's words ("Failed to load document (PDFium: Data format error)"), kept short."""
    return (str(e).rstrip(".") or type(e).__name__)[:100]
