"""Media as OpenAI and vLLM clients send them, through the official `openai` client against a
real `cascade serve --tiny` process: PDF documents in `file` parts, media ids (`uuid`), vLLM's
`mm_processor_kwargs` per request and `--limit-mm-per-prompt`."""

from __future__ import annotations

import base64

import openai
import pytest
from openai import OpenAI

from ..media.pdfs import INVOICE_TOTAL, invoice_pages, pdf_bytes
from .conftest import PIPELINES, cascade_serve, data_url, png_bytes

pytestmark = pytest.mark.slow
DOC, VIDEO, IMAGES = "cascade/doc_qa", "cascade/video", "cascade/images"
MAX_PAGES = 3


@pytest.fixture(scope="module")
def client(child_dir):
    with cascade_serve(
        "--no-shipped",
        "--pipeline",
        "doc_qa=doc_qa",
        "--workers",
        "1",
        "--pipeline",
        f"video={PIPELINES / 'video_fuzz.yaml'}",
        "--pipeline",
        f"images={PIPELINES / 'images_plain.yaml'}",
        "--limit-mm-per-prompt",
        "image=2,video=1",
        "--max-pdf-pages",
        str(MAX_PAGES),
        cwd=child_dir,
    ) as url:
        yield OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=300)


def file_part(data: bytes, filename: str = "invoice.pdf", *, bare: bool = False) -> dict:
    b64 = base64.b64encode(data).decode()
    return {
        "type": "file",
        "file": {
            "filename": filename,
            "file_data": b64 if bare else f"data:application/pdf;base64,{b64}",
        },
    }


def ask(client, model: str, question: str, *parts: dict, **kw):
    return client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": [*parts, {"type": "text", "text": question}]}],
        **kw,
    )


def test_a_two_page_pdf_is_answered_from_page_two(client):
    r = ask(client, DOC, "What is the total?", file_part(pdf_bytes(invoice_pages())))
    extra = r.model_extra["cascade"]
    assert extra["produced_by"] == "tool" and r.choices[0].message.content == INVOICE_TOTAL
    evidence = extra["evidence"]
    assert evidence["ocr_lines"] and {o["media_index"] for o in evidence["ocr_lines"]} == {1}
    assert [im["source"] for im in evidence["images"]] == [
        "messages[0].content[0] (invoice.pdf) page 2"
    ]
    assert extra["bill"]["baseline_visual_tokens"] > 0 and r.usage.prompt_tokens == 0


def test_bare_base64_file_data_is_a_pdf_too(client):
    r = ask(
        client,
        DOC,
        "What is the invoice number?",
        file_part(pdf_bytes(invoice_pages()[:1]), bare=True),
    )
    assert r.model_extra["cascade"]["evidence"]["images"][0]["source"].endswith("page 1")


def test_bad_file_parts_are_400_naming_the_part(client):
    with pytest.raises(openai.BadRequestError) as e:
        ask(
            client,
            DOC,
            "Total?",
            {"type": "text", "text": "see"},
            file_part(b"%PDF-1.7\nthis is not a pdf at all"),
        )
    assert e.value.body["param"] == "messages[0].content[1]"
    assert "not a readable PDF" in e.value.message and e.value.body["code"] == "invalid_file"
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, DOC, "Total?", file_part(png_bytes(invoice_pages()[0]), "scan.png"))
    assert e.value.body["param"] == "messages[0].content[0]" and "not a PDF" in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, DOC, "Total?", {"type": "file", "file": {"file_id": "file-abc"}})
    assert e.value.body["param"] == "messages[0].content[0].file.file_id"


def test_a_pdf_past_the_page_cap_is_413_naming_the_cap(client):
    pages = invoice_pages()
    with pytest.raises(openai.APIStatusError) as e:
        ask(client, DOC, "Total?", file_part(pdf_bytes([pages[0]] * (MAX_PAGES + 1))))
    assert e.value.status_code == 413 and e.value.body["code"] == "too_many_pages"
    assert f"limit of {MAX_PAGES} pages" in e.value.message and "--max-pdf-pages" in e.value.message


def image_part(data: bytes | None, uuid: str | None = None) -> dict:
    part = {
        "type": "image_url",
        "image_url": None if data is None else {"url": data_url(data, "image/png")},
    }
    return part if uuid is None else {**part, "uuid": uuid}


def _counters(r) -> dict:
    return r.model_extra["cascade"]["trace"]["counters"]


def test_a_uuid_sent_once_stands_for_its_media_later(client):
    from cascade.eval.render import render_text_image

    page = png_bytes(render_text_image("OPEN 24 HOURS", font_size=40))
    first = ask(client, DOC, "What does the text say?", image_part(page, "sign-1"))
    again = ask(client, DOC, "What does the text say?", image_part(None, "sign-1"))
    assert again.choices[0].message.content == first.choices[0].message.content
    lines = [o["text"] for o in again.model_extra["cascade"]["evidence"]["ocr_lines"]]
    assert any("OPEN" in t for t in lines), lines  # the kept pixels were read
    # The same pixels reach the content-keyed OCR cache: the second look is a hit.
    assert _counters(again).get("ocr_cache_hits", 0) > 0, _counters(again)
    # A uuid-only file part names a PDF sent earlier the same way.
    doc = pdf_bytes(invoice_pages())
    ask(client, DOC, "What is the total?", {**file_part(doc), "uuid": "inv-7"})
    r = ask(client, DOC, "What is the total?", {"type": "file", "file": None, "uuid": "inv-7"})
    assert r.choices[0].message.content == INVOICE_TOTAL


def test_an_unknown_uuid_is_400_asking_for_the_media(client):
    with pytest.raises(openai.BadRequestError) as e:
        ask(
            client,
            DOC,
            "What does it say?",
            {"type": "text", "text": "look:"},
            image_part(None, "never-sent"),
        )
    body = e.value.body
    assert body["code"] == "media_not_cached" and body["param"] == "messages[0].content[1]"
    assert "'never-sent'" in body["message"] and "resend the media" in body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, DOC, "What does it say?", {"type": "image_url", "image_url": None})
    assert e.value.body["code"] == "missing_media"


def test_one_uuid_with_other_bytes_is_400(client):
    from cascade.eval.render import render_text_image

    ask(
        client,
        DOC,
        "What does the text say?",
        image_part(png_bytes(render_text_image("FIRST")), "dup-1"),
    )
    with pytest.raises(openai.BadRequestError) as e:
        ask(
            client,
            DOC,
            "What does the text say?",
            image_part(png_bytes(render_text_image("SECOND")), "dup-1"),
        )
    assert e.value.body["code"] == "uuid_conflict"
    assert e.value.body["param"] == "messages[0].content[0].uuid"


def _video_stage(r) -> dict:
    stages = r.model_extra["cascade"]["trace"]["stages"]
    return next(s for s in stages if s["name"] == "frames")["counters"]


def test_mm_processor_kwargs_set_the_frames_of_that_request_only(client, media_dir):
    d, _ = media_dir
    video = {
        "type": "video_url",
        "video_url": {"url": data_url((d / "sign.mp4").read_bytes(), "video/mp4")},
    }
    before = _video_stage(ask(client, VIDEO, "What is shown?", video))
    assert before["frames_kept"] == 2  # video_fuzz.yaml: uniform, max_frames 2
    wide = _video_stage(
        ask(
            client,
            VIDEO,
            "What is shown?",
            video,
            extra_body={"mm_processor_kwargs": {"fps": 2.0, "max_frames": 5}},
        )
    )
    assert wide["frames_kept"] == 5 and wide["frames_decoded"] > 2
    after = _video_stage(ask(client, VIDEO, "What is shown?", video))
    assert after == before  # nothing stayed on the pipeline's stage


def test_mm_processor_kwargs_bound_the_pixels_the_vlm_sees(client):
    import numpy as np

    photo = np.random.default_rng(0).integers(0, 255, (300, 300, 3), dtype=np.uint8)
    part = image_part(png_bytes(photo))
    tokens = lambda r: r.model_extra["cascade"]["bill"]["visual_tokens"]  # noqa: E731
    plain = tokens(ask(client, IMAGES, "What is it?", part))  # a 224-px thumbnail: 8x8 merges
    small = tokens(
        ask(
            client,
            IMAGES,
            "What is it?",
            part,
            extra_body={"mm_processor_kwargs": {"max_pixels": 112 * 112}},
        )
    )
    assert (plain, small) == (64, 16)
    assert tokens(ask(client, IMAGES, "What is it?", part)) == plain


def test_mm_processor_kwargs_refusals_name_the_key(client, media_dir):
    part = image_part(png_bytes(invoice_pages()[0]))
    for kwargs, param, code in [
        ({"fsp": 2}, "mm_processor_kwargs.fsp", "invalid_request"),
        ({"fps": 0}, "mm_processor_kwargs.fps", "invalid_request"),
        ({"fps": 2}, "mm_processor_kwargs.fps", "unsupported_parameter"),  # no video here
        (
            {"min_pixels": 900, "max_pixels": 800},
            "mm_processor_kwargs.min_pixels",
            "invalid_mm_processor_kwargs",
        ),
    ]:
        with pytest.raises(openai.BadRequestError) as e:
            ask(client, IMAGES, "What is it?", part, extra_body={"mm_processor_kwargs": kwargs})
        assert (e.value.body["param"], e.value.body["code"]) == (param, code), e.value.body
    assert "did you mean 'fps'" in _message(client, {"fsp": 2}, part)


def _message(client, kwargs, part) -> str:
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, IMAGES, "What is it?", part, extra_body={"mm_processor_kwargs": kwargs})
    return e.value.body["message"]


def test_the_mm_limit_refuses_the_part_past_it(client, media_dir):
    from cascade.eval.render import render_text_image

    parts = [image_part(png_bytes(render_text_image(t))) for t in ("A", "B", "C")]
    assert ask(client, IMAGES, "Which?", *parts[:2]).choices[0].message.content is not None
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, IMAGES, "Which?", *parts)
    body = e.value.body
    assert body["code"] == "too_many_media" and body["param"] == "messages[0].content[2]"
    assert "--limit-mm-per-prompt image=2" in body["message"]
