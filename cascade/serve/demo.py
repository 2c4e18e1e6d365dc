"""The web demo: upload a video or images, ask, and see the answer with its evidence and bill.

Built on the server's `Engine` (same live pipelines, same caches, same limits), mounted at /demo by
`cascade demo` / `cascade serve --demo`. Examples are generated offline from `cascade.media_gen`
(a video with a sign, a rendered receipt, the ultralytics bus photo) so one click works anywhere.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import CascadeError
from .bill import bill_of, cache_events
from .engine import Engine
from .errors import APIError
from .media import media_from_file
from .render import (bill_figure, bill_markdown, evidence_gallery, overview, route_markdown,
                     tools_markdown)

__all__ = ["build_demo", "mount_demo", "demo_examples", "DEMO_CSS"]

DEMO_CSS = "#answer {font-size: 1.15em} .tiny-note {background: #fff3bf; padding: 6px 10px}"
RECEIPT = "CORNER CAFE\nLatte        4.50\nBagel        3.25\nTOTAL        7.75"


def _examples_dir() -> Path:
    root = os.environ.get("VLM_CASCADE_CACHE") or Path.home() / ".cache" / "vlm-cascade"
    return Path(root) / "demo-examples"


def demo_examples(models: list[str], folder: Path | None = None) -> list[list[Any]]:
    """[[files], question, model] rows for the models being served; media made once, offline."""
    from PIL import Image as PILImage

    from ..media_gen import bus_image_path, make_sign_video, render_text_image

    folder = Path(folder or _examples_dir())
    folder.mkdir(parents=True, exist_ok=True)
    video, receipt = folder / "sign_video.mp4", folder / "receipt.png"
    if not video.is_file():
        make_sign_video(folder / "sign_video.tmp.mp4")
        os.replace(folder / "sign_video.tmp.mp4", video)
    if not receipt.is_file():
        PILImage.fromarray(render_text_image(RECEIPT, font_size=36, padding=40)).save(receipt)
    rows = []

    def pick(*names: str) -> str | None:
        return next((f"cascade/{n}" for n in names if f"cascade/{n}" in models), None)

    video_model = pick("video_qa") or next((m for m in models if "video" in m), None)
    image_model = pick("multi_image_qa") or next((m for m in models if "image" in m), None)
    doc_model = pick("doc_qa") or image_model
    if video_model:
        rows.append([[str(video)], "What are the opening hours on the sign?", video_model])
        rows.append([[str(video)], "What animal appears in the video?", video_model])
    if image_model:
        rows.append([[bus_image_path()], "How many people are in the picture?", image_model])
    if doc_model:
        rows.append([[str(receipt)], "What is the total on the receipt?", doc_model])
    return rows


def _received(value: Any) -> list[Path]:
    """The files Gradio received from the client: each must be a file in Gradio's upload folder,
    where uploads (and the examples' copies) land; any other path is refused unread."""
    from gradio.utils import get_upload_folder

    items = value if isinstance(value, (list, tuple)) else [value] if value else []
    folder = Path(get_upload_folder()).resolve()
    out = []
    for v in items:
        path = Path(str(getattr(v, "name", None) or v)).resolve()
        if not path.is_relative_to(folder) or not path.is_file():
            raise APIError(400, "only files uploaded to this demo can be read", code="not_uploaded")
        out.append(path)
    return out


def _estimate_baseline_seconds(bill: dict[str, Any], flops_per_s: float | None) -> dict[str, Any]:
    """A tool answer ran no VLM, so it has no VLM time to scale: price its full-resolution baseline
    at the FLOP rate this demo's VLM reached on earlier answers (an estimate, labelled so)."""
    base = (bill.get("baseline_vision_flops") or 0) + (bill.get("baseline_prefill_flops") or 0)
    if "baseline_seconds_estimate" in bill or not base or not flops_per_s:
        return bill
    return {**bill, "baseline_seconds_estimate": bill["seconds"] + base / flops_per_s}


def _vlm_flops_per_s(bill: dict[str, Any]) -> float | None:
    """Tower + prefill FLOPs per second of time to first token, from a VLM answer's bill."""
    spent = (bill.get("vision_flops") or 0) + (bill.get("prefill_flops") or 0)
    ttft = bill.get("vlm_seconds") or 0
    return spent / ttft if spent > 0 and ttft > 0 else None


def _cache_markdown(turn: int, answer) -> str:
    events = cache_events(answer)
    if not events:
        return f"**Turn {turn}.** No cache lookups reported by this pipeline."
    parts = []
    for name, (hits, lookups) in sorted(events.items()):
        label = {"kv_prefix": "VLM KV prefix", "embed": "CLIP embeddings", "ocr": "OCR",
                 "detect": "detections"}.get(name, name)
        parts.append(f"{label} {'**hit**' if hits == lookups else f'{hits}/{lookups} hits'}")
    return f"**Turn {turn}** of this session: " + ", ".join(parts)


def build_demo(engine: Engine):
    import gradio as gr

    models = list(engine.models)
    default = next((m for m in ("cascade/video_qa", "cascade/multi_image_qa") if m in models), models[0])
    tiny = engine.config.random_weights
    rates: dict[str, float] = {}  # model -> FLOP/s its VLM reached, for tool answers' baselines

    def ask(files: Any, question: str, model: str, state: dict | None):
        if not files:
            raise gr.Error("Upload a video or one or more images first (or click an example).")
        if not question or not question.strip():
            raise gr.Error("Type a question.")
        try:
            served = engine.get(model)
            media = [media_from_file(p, engine.config, p.name) for p in _received(files)]
            # Same pipeline and media: a follow-up, whose earlier turns go into the prompt.
            key = [model] + [m.digest for m in media]
            state = state if state and state.get("key") == key else {"key": key, "turns": []}
            history = state["turns"] if "history" in served.qa.pipeline.spec.inputs else []
            answer = engine.answer(served, media, question.strip(), history=history)
        except (APIError, CascadeError) as e:
            raise gr.Error(str(getattr(e, "message", e))) from None
        state["turns"] = [*state["turns"], (question.strip(), answer.text)]
        ev, bill = answer.evidence, bill_of(answer)
        if (rate := _vlm_flops_per_s(bill)) is not None:
            rates[model] = rate
        bill = _estimate_baseline_seconds(bill, rates.get(model))
        sources = {i: m.pixels for i, m in enumerate(media) if m.pixels is not None}
        text = answer.text or "_(empty answer)_"
        if tiny and answer.produced_by == "vlm":
            text += "\n\n<small>(random-weight tiny VLM: this text is noise)</small>"
        return (f"### {text}", route_markdown(ev, answer.produced_by),
                _cache_markdown(len(state["turns"]), answer), evidence_gallery(ev),
                overview(ev, sources), bill_figure(bill), bill_markdown(bill), tools_markdown(ev),
                state)

    with gr.Blocks(title="vlm-cascade demo") as demo:
        gr.Markdown("# vlm-cascade\nLook cheaply first, then send the VLM only the pixels the "
                    "question needs. Every answer shows its evidence and its bill against the "
                    "full-resolution baseline.")
        if tiny:
            gr.Markdown("**Offline mode (`--tiny`)**: the VLM is a tiny Qwen2-VL with *random "
                        "weights* and CLIP is randomly initialised, so VLM answers are random text. "
                        "OCR and detector answers are real models, and the evidence and the bill "
                        "(visual tokens, FLOPs, time) are real for the architecture.",
                        elem_classes=["tiny-note"])
        state = gr.State(None)
        with gr.Row():
            with gr.Column(scale=1):
                files = gr.File(label="Video or images", file_count="multiple",
                                file_types=["image", "video"], elem_id="media-input")
                model = gr.Dropdown(models, value=default, label="Pipeline", elem_id="pipeline")
                question = gr.Textbox(label="Question", placeholder="What does the sign say?",
                                      elem_id="question")
                button = gr.Button("Ask", variant="primary", elem_id="ask")
                gr.Examples(demo_examples(models), inputs=[files, question, model],
                            label="Examples (generated offline)", elem_id="examples")
            with gr.Column(scale=2):
                answer = gr.Markdown(elem_id="answer")
                route = gr.Markdown(elem_id="route")
                cache = gr.Markdown(elem_id="cache")
                # "contain", not Gradio's default "cover": a receipt must show whole, not as a
                # zoomed strip of its heading. Gallery cells are square, so a fixed column count
                # with a height above one cell keeps a row whole; a click opens the full image.
                where = gr.Gallery(label="Where it looked: high-res tiles (orange), OCR (blue), "
                                   "detections (red); click to zoom", columns=2, fit_columns=False,
                                   height=440, object_fit="contain", elem_id="overview")
                gallery = gr.Gallery(label="Evidence: what the VLM saw (time, tile, score); "
                                     "click to zoom", columns=4, fit_columns=False, height=250,
                                     object_fit="contain", elem_id="evidence-gallery")
                gr.Markdown("#### The bill: this answer vs the full-resolution baseline")
                plot = gr.Plot(show_label=False, elem_id="bill-plot")
                table = gr.Markdown(elem_id="bill-table")
                tools = gr.Markdown(elem_id="tools")
        outputs = [answer, route, cache, gallery, where, plot, table, tools, state]
        button.click(ask, [files, question, model, state], outputs)
        question.submit(ask, [files, question, model, state], outputs)
    # Gradio refuses input files that were not uploaded only once an app has "launched"; a mounted
    # app never does, so a client could name any server path and Gradio would copy it into its
    # cache and pass it on. Marked launched, Gradio refuses such paths before `ask` runs.
    demo.has_launched = True
    return demo


def mount_demo(app, engine: Engine, path: str = "/demo") -> None:
    """Mount the demo on the server's FastAPI app at `path`."""
    import gradio as gr

    gr.mount_gradio_app(app, build_demo(engine), path=path, css=DEMO_CSS)
