"""The demo's pipeline choice from an upload, and its plain-words refusals (no server needed)."""

from __future__ import annotations

import numpy as np
import pytest

from cascade.serve.demo_choice import choose_pipeline, looks_like_page, media_kind, mismatch

from .conftest import png_bytes

SHIPPED = {
    "cascade/video_qa": {"video"},
    "cascade/doc_qa": {"images"},
    "cascade/multi_image_qa": {"images"},
    "cascade/full_res": {"images"},
}
SMALL = {"cascade/video_small": {"video"}, "cascade/images_small": {"images"}}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from cascade.eval.photos import bus_image_path
    from cascade.eval.render import render_text_image

    d = tmp_path_factory.mktemp("uploads")
    (d / "receipt.png").write_bytes(
        png_bytes(
            render_text_image("CORNER CAFE\nLatte 4.50\nTOTAL 7.75", font_size=36, padding=40)
        )
    )
    (d / "noise.png").write_bytes(
        png_bytes(np.random.default_rng(0).integers(0, 255, (120, 160, 3), dtype=np.uint8))
    )
    (d / "clip.mp4").write_bytes(b"not decoded here")
    (d / "scan.pdf").write_bytes(b"%PDF-1.4")
    return {
        "receipt": d / "receipt.png",
        "bus": bus_image_path(),
        "noise": d / "noise.png",
        "video": d / "clip.mp4",
        "pdf": d / "scan.pdf",
    }


def test_kinds_and_pages(files):
    assert [media_kind(files[k]) for k in ("video", "pdf", "bus")] == ["video", "pdf", "image"]
    assert looks_like_page(files["receipt"])
    assert not looks_like_page(files["bus"]) and not looks_like_page(files["noise"])
    assert not looks_like_page(files["video"])  # not an image: not a page


@pytest.mark.parametrize(
    "upload, shipped, small",
    [
        (["video"], "cascade/video_qa", "cascade/video_small"),
        (["receipt"], "cascade/doc_qa", "cascade/images_small"),
        (["pdf"], "cascade/doc_qa", "cascade/images_small"),
        (["bus"], "cascade/multi_image_qa", "cascade/images_small"),
        (["bus", "noise", "receipt"], "cascade/multi_image_qa", "cascade/images_small"),
    ],
)
def test_the_upload_picks_the_pipeline(files, upload, shipped, small):
    paths = [files[k] for k in upload]
    assert choose_pipeline(paths, SHIPPED)[0] == shipped
    assert choose_pipeline(paths, SMALL)[0] == small  # other servers: what takes that media
    assert choose_pipeline([], SHIPPED) == (None, "")


def test_a_pipeline_that_does_not_fit_is_said_in_words(files):
    three = [files["bus"], files["noise"], files["receipt"]]
    why = mismatch(three, "cascade/video_qa", {"video"}, SHIPPED)
    assert why == (
        "The **video_qa** pipeline answers about a video, and you uploaded 3 images. "
        "Choose **multi_image_qa** instead."
    )
    why = mismatch([files["video"]], "cascade/doc_qa", {"images"}, SHIPPED)
    assert "reads images, and you uploaded a video" in why and "**video_qa**" in why
    assert mismatch([files["pdf"]], "cascade/doc_qa", {"images"}, SHIPPED) is None
    why = mismatch([files["pdf"]], "cascade/video_qa", {"video"}, SHIPPED)
    assert why == (
        "The **video_qa** pipeline answers about a video, and you uploaded a PDF. "
        "Choose **doc_qa** instead."
    )
    assert mismatch(three, "cascade/multi_image_qa", {"images"}, SHIPPED) is None
    assert mismatch([files["video"]], "cascade/video_qa", {"video"}, SHIPPED) is None


def test_an_uploaded_pdf_becomes_its_pages_and_a_broken_one_is_refused_by_name(files, tmp_path):
    from cascade.serve.config import ServeConfig
    from cascade.serve.errors import APIError
    from cascade.serve.media import media_from_file

    from ..media.pdfs import invoice_pages, pdf_bytes

    doc = tmp_path / "invoice.pdf"
    doc.write_bytes(pdf_bytes(invoice_pages()))
    pages = media_from_file(doc, ServeConfig(), "invoice.pdf")
    assert [(m.kind, m.label) for m in pages] == [
        ("image", "invoice.pdf page 1"),
        ("image", "invoice.pdf page 2"),
    ]
    with pytest.raises(APIError) as e:
        media_from_file(files["pdf"], ServeConfig(), "scan.pdf")
    assert e.value.status == 400 and e.value.message.startswith("scan.pdf: ")
    assert str(files["pdf"].parent) not in e.value.message
    with pytest.raises(APIError) as e:
        media_from_file(doc, ServeConfig(max_pdf_pages=1), "invoice.pdf")
    assert e.value.status == 413 and "--max-pdf-pages" in e.value.message
