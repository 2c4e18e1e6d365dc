"""Media as OpenAI and vLLM clients send them, through the official `openai` client against a
real `cascade serve --tiny` process: PDF documents in `file` parts, media ids (`uuid`)."""
from __future__ import annotations

import base64

import openai
import pytest
from openai import OpenAI

from ..media.pdfs import INVOICE_TOTAL, invoice_pages, pdf_bytes
from .conftest import cascade_serve, data_url, png_bytes

pytestmark = pytest.mark.slow
DOC = "cascade/doc_qa"
MAX_PAGES = 3


@pytest.fixture(scope="module")
def client():
    with cascade_serve("--no-shipped", "--pipeline", "doc_qa=doc_qa", "--workers", "1",
                       "--max-pdf-pages", str(MAX_PAGES)) as url:
        yield OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=300)


def file_part(data: bytes, filename: str = "invoice.pdf", *, bare: bool = False) -> dict:
    b64 = base64.b64encode(data).decode()
    return {"type": "file", "file": {"filename": filename,
                                     "file_data": b64 if bare else f"data:application/pdf;base64,{b64}"}}


def ask(client, model: str, question: str, *parts: dict, **kw):
    return client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": [*parts, {"type": "text",
                                                                     "text": question}]}], **kw)


def test_a_two_page_pdf_is_answered_from_page_two(client):
    r = ask(client, DOC, "What is the total?", file_part(pdf_bytes(invoice_pages())))
    extra = r.model_extra["cascade"]
    assert extra["produced_by"] == "tool" and r.choices[0].message.content == INVOICE_TOTAL
    evidence = extra["evidence"]
    assert evidence["ocr_lines"] and {o["media_index"] for o in evidence["ocr_lines"]} == {1}
    assert [im["source"] for im in evidence["images"]] == \
        ["messages[0].content[0] (invoice.pdf) page 2"]
    assert extra["bill"]["baseline_visual_tokens"] > 0 and r.usage.prompt_tokens == 0


def test_bare_base64_file_data_is_a_pdf_too(client):
    r = ask(client, DOC, "What is the invoice number?",
            file_part(pdf_bytes(invoice_pages()[:1]), bare=True))
    assert r.model_extra["cascade"]["evidence"]["images"][0]["source"].endswith("page 1")


def test_bad_file_parts_are_400_naming_the_part(client):
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, DOC, "Total?", {"type": "text", "text": "see"},
            file_part(b"%PDF-1.7\nthis is not a pdf at all"))
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
    part = {"type": "image_url", "image_url": None if data is None else {
        "url": data_url(data, "image/png")}}
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
        ask(client, DOC, "What does it say?", {"type": "text", "text": "look:"},
            image_part(None, "never-sent"))
    body = e.value.body
    assert body["code"] == "media_not_cached" and body["param"] == "messages[0].content[1]"
    assert "'never-sent'" in body["message"] and "resend the media" in body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, DOC, "What does it say?", {"type": "image_url", "image_url": None})
    assert e.value.body["code"] == "missing_media"


def test_one_uuid_with_other_bytes_is_400(client):
    from cascade.eval.render import render_text_image

    ask(client, DOC, "What does the text say?",
        image_part(png_bytes(render_text_image("FIRST")), "dup-1"))
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, DOC, "What does the text say?",
            image_part(png_bytes(render_text_image("SECOND")), "dup-1"))
    assert e.value.body["code"] == "uuid_conflict"
    assert e.value.body["param"] == "messages[0].content[0].uuid"

