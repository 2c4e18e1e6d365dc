"""PDF documents as page images (`cascade.pdf`), through the pipeline inputs and the Python API."""

from __future__ import annotations

import numpy as np
import pytest

from cascade.errors import InputError
from cascade.imagefile import ImageTooLarge
from cascade.pdf import DEFAULT_DPI, PdfTooLong, is_pdf, render_pdf

from .pdfs import INVOICE_TOTAL, invoice_pages, pdf_bytes


def _page(shade: int, width: int = 200, height: int = 100) -> np.ndarray:
    px = np.full((height, width, 3), shade, np.uint8)
    px[10:30, 10:60] = (200, 30, 30)  # a red block, so colour order is checked too
    return px


def test_pages_render_in_order_with_their_names_and_size_at_the_dpi():
    data = pdf_bytes([_page(255), _page(90, 300, 150)], dpi=72)
    pages = render_pdf(data, name="r.pdf", dpi=144, first_index=3)
    assert [p.source for p in pages] == ["r.pdf page 1", "r.pdf page 2"]
    assert [p.media_index for p in pages] == [3, 4]
    assert [(p.width, p.height) for p in pages] == [(400, 200), (600, 300)]  # 2x at 144 DPI
    r, g, b = pages[0].pixels[40, 40].tolist()  # PIL's writer stores JPEG: close, not exact
    assert r > 180 and g < 60 and b < 60  # RGB, not PDFium's BGR
    assert abs(int(pages[1].pixels[150, 400, 0]) - 90) <= 2


def test_the_default_dpi_keeps_a_page_saved_at_it_as_it_was():
    page = _page(255, 240, 120)
    (got,) = render_pdf(pdf_bytes([page], dpi=DEFAULT_DPI), name="p.pdf")
    assert (got.width, got.height) == (240, 120)


def test_bad_documents_are_refused_naming_them():
    with pytest.raises(InputError, match=r"^doc\.pdf: not a readable PDF"):
        render_pdf(b"%PDF-1.7\nthis is not really a pdf", name="doc.pdf")
    data = pdf_bytes([_page(255)] * 3)
    with pytest.raises(PdfTooLong, match=r"doc\.pdf has 3 pages, over the limit of 2 pages") as e:
        render_pdf(data, name="doc.pdf", max_pages=2)
    assert (e.value.pages, e.value.limit) == (3, 2)
    with pytest.raises(ImageTooLarge, match=r"doc\.pdf page 1 is 400x200 pixels at 288 DPI"):
        render_pdf(pdf_bytes([_page(255)], dpi=144), name="doc.pdf", dpi=288, max_pixels=50_000)


def test_before_page_sees_each_page_before_it_is_rendered():
    seen = []
    render_pdf(
        pdf_bytes([_page(255), _page(0, 100, 50)], dpi=72),
        name="d",
        dpi=72,
        before_page=lambda n, w, h: seen.append((n, w, h)),
    )
    assert seen == [(1, 200, 100), (2, 100, 50)]


def test_is_pdf_reads_the_header_not_the_name(tmp_path):
    (tmp_path / "a.bin").write_bytes(pdf_bytes([_page(255)]))
    (tmp_path / "b.pdf").write_bytes(b"\x89PNG\r\n")
    assert is_pdf(tmp_path / "a.bin") and not is_pdf(tmp_path / "b.pdf")


def test_an_images_input_takes_a_pdf_as_its_pages(tmp_path):
    from cascade.inputs import coerce

    doc = tmp_path / "two.pdf"
    doc.write_bytes(pdf_bytes([_page(255), _page(100)]))
    images = coerce("images", "images", [_page(30), str(doc)])
    assert [im.media_index for im in images] == [0, 1, 2]
    assert [im.source for im in images[1:]] == [f"{doc} page 1", f"{doc} page 2"]
    with pytest.raises(InputError, match="takes one image, and the PDF has 2 pages"):
        coerce("image", "image", doc)
    assert coerce("image", "image", pdf_bytes([_page(255)])).source == "input 'image' PDF 0 page 1"


@pytest.mark.slow
def test_docqa_answers_from_page_two_of_a_pdf(tmp_path):
    """The total is printed on page 2 of 2: the tool reads it from page 2's OCR, and the
    evidence names page 2 only."""
    from cascade.api import DocQA

    doc = tmp_path / "invoice.pdf"
    doc.write_bytes(pdf_bytes(invoice_pages()))
    answer = DocQA.offline().ask(str(doc), "What is the total?")
    assert answer.produced_by == "tool" and answer.text == INVOICE_TOTAL
    assert answer.evidence.ocr_lines and {o.media_index for o in answer.evidence.ocr_lines} == {1}
    assert [im.source for im in answer.evidence.images] == [f"{doc} page 2"]
    assert answer.bill.baseline_visual_tokens > 0  # priced on both pages at full resolution
