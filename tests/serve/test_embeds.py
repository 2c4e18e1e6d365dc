"""Image embeddings in and out, on the real tiny Qwen2-VL (random weights, built from a config by
`cascade.vlm.tiny`): `cascade embed` writes an image's tower output as an `image_embeds` content
part; that part sent in place of the image is answered with the same greedy tokens, by `QA.ask`
and by the server, and the same embeddings sent again reuse the KV prefix like the same image.
Embeddings that do not fit the model are a 400 naming the part and the shape it takes."""

from __future__ import annotations

import base64
import io
import json

import httpx
import numpy as np
import pytest
import torch

from cascade.artifacts import Image

from .conftest import (
    IMAGES,
    PIPELINES,
    chat,
    data_url,
    image_part,
    png_bytes,
    running_server,
    small_config,
)

pytestmark = pytest.mark.slow
PIXELS = np.random.default_rng(21).integers(0, 255, (48, 64, 3), dtype=np.uint8)
QUESTION = "What is in the picture?"


@pytest.fixture(scope="module")
def embeds_part(tiny_vlm, tmp_path_factory) -> dict:
    """`cascade embed` of the image, as a user runs it (in this process: `main`)."""
    from cascade.cli import main

    d = tmp_path_factory.mktemp("embed")
    (d / "img.png").write_bytes(png_bytes(PIXELS))
    assert main(["embed", str(d / "img.png"), "--model", tiny_vlm, "--out", str(d / "e.json")]) == 0
    part = json.loads((d / "e.json").read_text())
    assert part["type"] == "image_embeds" and set(part["image_embeds"]) == {
        "image_embeds",
        "image_grid_thw",
    }
    return part


def _b64(t: torch.Tensor) -> str:
    buf = io.BytesIO()
    torch.save(t, buf)
    return base64.b64encode(buf.getvalue()).decode()


def _tensor(text: str) -> torch.Tensor:
    return torch.load(io.BytesIO(base64.b64decode(text)), weights_only=True)


def test_qa_ask_answers_embeddings_with_the_tokens_of_the_image(tiny_vlm, embeds_part):
    from cascade.api import QA
    from cascade.vlm.embeds import load_embeds

    qa = QA(str(PIPELINES / "images_plain.yaml"), model=tiny_vlm)
    from_image = qa.ask([Image(PIXELS, source="img")], QUESTION)
    sent = load_embeds(embeds_part["image_embeds"], "embeds")
    from_embeds = qa.ask([sent], QUESTION)
    assert from_embeds.text == from_image.text and from_image.text
    assert from_embeds.completions[0].token_ids == from_image.completions[0].token_ids
    assert from_embeds.bill.visual_tokens == from_image.bill.visual_tokens
    # What `cascade embed` wrote is what the tower made of the image in this pipeline's model.
    vlm = qa.pipeline.stages["vlm"].model("vlm").vlm
    again = vlm.image_embeds([Image(PIXELS)])[0]
    assert torch.equal(again.embeds, sent.embeds) and again.grid == sent.grid


@pytest.fixture(scope="module")
def server(tiny_vlm):
    from cascade.serve.app import create_app

    app = create_app(small_config(tiny_vlm))
    with running_server(app) as url, httpx.Client(base_url=url, timeout=120) as client:
        yield client


def _vlm(body: dict) -> dict:
    return next(s for s in body["cascade"]["trace"]["stages"] if s["name"] == "vlm")["counters"]


def test_the_server_answers_embeddings_as_the_image_and_caches_them(server, embeds_part):
    from cascade.cache import clear_all_caches

    clear_all_caches()  # the model (and its caches) is shared with the QA test's
    image = server.post(
        "/v1/chat/completions",
        json=chat(IMAGES, QUESTION, image_part(data_url(png_bytes(PIXELS), "image/png"))),
    )
    assert image.status_code == 200, image.text
    turns = [
        server.post("/v1/chat/completions", json=chat(IMAGES, QUESTION, embeds_part))
        for _ in range(2)
    ]
    for r in turns:
        assert r.status_code == 200, r.text
        assert r.json()["choices"] == image.json()["choices"]
    # Sent again, the same embeddings hit the KV prefix cache as the same image does.
    assert [_vlm(r.json())["kv_cache_hits"] for r in turns] == [0, 1]
    # ... and a uuid names them like any media.
    kept = {**embeds_part, "uuid": "emb-1"}
    assert server.post("/v1/chat/completions", json=chat(IMAGES, QUESTION, kept)).status_code == 200
    alone = {"type": "image_embeds", "image_embeds": None, "uuid": "emb-1"}
    r = server.post("/v1/chat/completions", json=chat(IMAGES, QUESTION, alone))
    assert r.status_code == 200 and r.json()["choices"] == image.json()["choices"]


def test_embeddings_that_do_not_fit_the_model_are_a_400_naming_the_part(server, embeds_part):
    fields = embeds_part["image_embeds"]
    embeds, grid = _tensor(fields["image_embeds"]), _tensor(fields["image_grid_thw"])
    tokens, dim = embeds.shape
    bad = {
        "a wrong width": ({"image_embeds": _b64(embeds[:, :-1])}, f"[{tokens}, {dim}]"),
        "a wrong count": ({"image_embeds": _b64(embeds[:-1])}, f"[{tokens}, {dim}]"),
        "integers": ({"image_embeds": _b64(embeds.long())}, "floating"),
        "an odd grid": ({"image_grid_thw": _b64(torch.tensor([[1, 3, 4]]))}, "multiples of 2"),
        "not a tensor file": ({"image_embeds": base64.b64encode(b"junk").decode()}, "torch.save"),
        "not base64": ({"image_embeds": "%%%"}, "not valid base64"),
        "a grid of floats": ({"image_grid_thw": _b64(grid.float())}, "3 integers"),
    }
    for what, (change, words) in bad.items():
        part = {"type": "image_embeds", "image_embeds": {**fields, **change}}
        r = server.post("/v1/chat/completions", json=chat(IMAGES, QUESTION, part))
        assert r.status_code == 400, (what, r.text)
        err = r.json()["error"]
        assert "messages[0].content[0]" in err["message"] and words in err["message"], (what, err)
    r = server.post(
        "/v1/chat/completions",
        json=chat(
            IMAGES, QUESTION, {"type": "image_embeds", "image_embeds": {"image_embeds": "x"}}
        ),
    )
    assert r.status_code == 400 and "image_grid_thw" in r.json()["error"]["message"]
