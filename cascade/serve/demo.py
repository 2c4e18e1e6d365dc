"""The web demo: upload a video or images, ask, and see the answer with its evidence and bill.

Built on the server's `Engine` (same live pipelines, same caches, same limits), mounted at /demo by
`cascade demo` / `cascade serve --demo`. Examples are made at first use, offline, by `demo_media`
(a video with a sign, a rendered receipt, the ultralytics bus photo) so one click works anywhere.

An upload picks the pipeline that fits it (`demo_choice`; the user may change it). Whatever stops
an answer (a pipeline that does not take these files, a file that does not decode, a limit) is
said in the answer panel, in words. The demo reads only files uploaded to it and its own
examples (`DemoFiles`, `blocked_paths`): a client naming any other server path in a Gradio
`FileData` is refused before anything is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..cache import cache_dir
from ..errors import CascadeError
from .bill import bill_of, cache_events
from .demo_choice import choose_pipeline, mismatch
from .demo_media import demo_media
from .engine import Engine
from .errors import APIError
from .media import PixelBudget, media_from_file
from .render import (
    bill_figure,
    bill_markdown,
    evidence_gallery,
    overview,
    route_markdown,
    tools_markdown,
)

__all__ = ["build_demo", "mount_demo", "demo_examples", "blocked_paths", "DemoFiles", "DEMO_CSS"]

DEMO_CSS = (
    "#answer {font-size: 1.15em} .tiny-note {background: #fff3bf; padding: 6px 10px} "
    ".demo-error {border-left: 4px solid #e8590c; padding: 4px 12px; background: #fff4e6}"
)


def _examples_dir() -> Path:
    return cache_dir("demo-examples")


def demo_examples(models: list[str], folder: Path | None = None) -> list[list[Any]]:
    """[[files], question, model] rows for the models being served; media made once, offline."""
    media = demo_media(Path(folder or _examples_dir()))
    rows = []

    def pick(*names: str) -> str | None:
        return next((f"cascade/{n}" for n in names if f"cascade/{n}" in models), None)

    video_model = pick("video_qa") or next((m for m in models if "video" in m), None)
    image_model = pick("multi_image_qa") or next((m for m in models if "image" in m), None)
    doc_model = pick("doc_qa") or image_model
    if video_model:
        rows.append([[str(media.video)], "What are the opening hours on the sign?", video_model])
        rows.append([[str(media.video)], "What animal appears in the video?", video_model])
    if image_model:
        rows.append([[str(media.photo)], "How many people are in the picture?", image_model])
    if doc_model:
        rows.append([[str(media.receipt)], "What is the total on the receipt?", doc_model])
    return rows


class DemoFiles:
    """What the demo reads: files uploaded to it (`upload_file_set`, filled by Gradio's upload
    route for this app) and the copies Gradio made of its own examples. A path the client names
    that is neither (a server file under the launch folder, the home folder, the examples'
    folder, anything reached by `..` or a symlink) is refused unread: paths are compared once
    resolved, symlinks followed."""

    def __init__(self, blocks: Any, examples: list[str]):
        from gradio.processing_utils import save_file_to_cache
        from gradio.utils import get_upload_folder

        self.blocks = blocks
        self.examples = {
            Path(save_file_to_cache(p, get_upload_folder())).resolve() for p in examples
        }

    def received(self, value: Any) -> list[Path]:
        items = value if isinstance(value, (list, tuple)) else [value] if value else []
        uploaded = {Path(p).resolve() for p in list(self.blocks.upload_file_set)} | self.examples
        out = []
        for v in items:
            path = Path(str(getattr(v, "name", None) or v)).resolve()
            if path not in uploaded or not path.is_file():
                raise APIError(
                    400, "only files uploaded to this demo can be read", code="not_uploaded"
                )
            out.append(path)
        return out


def blocked_paths(engine: Engine, examples_folder: Path) -> list[str]:
    """Server folders Gradio must never serve or copy from, even where its defaults would (the
    launch folder, the system temp folder for outputs): the launch folder, the home folder, the
    examples' source folder, --media-root and --upload-dir. A folder that holds Gradio's own
    upload folder cannot be blocked whole (uploads would be refused too); `DemoFiles` still
    refuses anything in it that was not uploaded."""
    from gradio.utils import get_upload_folder

    gradio_uploads = Path(get_upload_folder()).resolve()
    folders = [
        Path.cwd(),
        Path.home(),
        examples_folder,
        engine.config.media_root,
        engine.uploads.folder,
    ]
    out = []
    for folder in folders:
        if folder is None:
            continue
        folder = Path(folder).resolve()
        if not gradio_uploads.is_relative_to(folder) and str(folder) not in out:
            out.append(str(folder))
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
        label = {
            "kv_prefix": "VLM KV prefix",
            "embed": "CLIP embeddings",
            "ocr": "OCR",
            "detect": "detections",
        }.get(name, name)
        parts.append(f"{label} {'**hit**' if hits == lookups else f'{hits}/{lookups} hits'}")
    return f"**Turn {turn}** of this session: " + ", ".join(parts)


def _failed(message: str, state: dict | None) -> tuple:
    """The outputs of an ask that could not be answered: the reason in the answer panel, in
    words, the evidence panels emptied (no red error boxes, no toast that vanishes)."""
    text = f"<div class='demo-error'>\n\n**Could not answer.** {message}\n\n</div>"
    return (text, "", "", [], [], None, "", "", state)


def build_demo(engine: Engine, examples_folder: Path | None = None):
    """The Gradio Blocks over `engine`; `demo.files` says what it may read."""
    import gradio as gr

    models = list(engine.models)
    takes = {m: set(s.media_types.values()) for m, s in engine.models.items()}
    default = next(
        (m for m in ("cascade/video_qa", "cascade/multi_image_qa") if m in models), models[0]
    )
    tiny = engine.config.random_weights
    rates: dict[str, float] = {}  # model -> FLOP/s its VLM reached, for tool answers' baselines

    def ask(files: Any, question: str, model: str, state: dict | None):
        if not files:
            return _failed(
                "Upload a video, one or more images or a PDF first (or click an example).", state
            )
        if not question or not question.strip():
            return _failed("Type a question.", state)
        try:
            served = engine.get(model)
            paths = demo.files.received(files)
            if (why := mismatch(paths, served.id, takes[served.id], takes)) is not None:
                return _failed(why, state)
            budget = PixelBudget(engine.config.max_total_pixels)
            media = [m for p in paths for m in media_from_file(p, engine.config, p.name, budget)]
            # Same pipeline and media: a follow-up, whose earlier turns go into the prompt.
            key = [model] + [m.digest for m in media]
            state = state if state and state.get("key") == key else {"key": key, "turns": []}
            history = state["turns"] if "history" in served.qa.pipeline.spec.inputs else []
            answer = engine.answer(served, media, question.strip(), history=history)
        except (APIError, CascadeError) as e:
            return _failed(str(getattr(e, "message", e)), state)
        state["turns"] = [*state["turns"], (question.strip(), answer.text)]
        ev, bill = answer.evidence, bill_of(answer)
        if (rate := _vlm_flops_per_s(bill)) is not None:
            rates[model] = rate
        bill = _estimate_baseline_seconds(bill, rates.get(model))
        sources = {i: m.pixels for i, m in enumerate(media) if m.pixels is not None}
        names = {i: m.label for i, m in enumerate(media)}  # the file's name, or a PDF's page
        text = answer.text or "_(empty answer)_"
        if tiny and answer.produced_by == "vlm":
            text += "\n\n<small>(random-weight tiny VLM: this text is noise)</small>"
        return (
            f"### {text}",
            route_markdown(ev, answer.produced_by),
            _cache_markdown(len(state["turns"]), answer),
            evidence_gallery(ev, names),
            overview(ev, sources, names=names),
            bill_figure(bill),
            bill_markdown(bill),
            tools_markdown(ev, names=names),
            state,
        )

    def pick(files: Any, current: str):
        """An upload picks the pipeline that fits it (the user may change it afterwards)."""
        try:
            paths = demo.files.received(files)
        except APIError:
            return current, ""
        chosen, what = choose_pipeline(paths, takes)
        if chosen is None:
            return current, ""
        note = (
            f"Pipeline chosen for {what}: **{chosen.removeprefix('cascade/')}**. "
            "Change it above to use another."
        )
        return chosen, note

    with gr.Blocks(title="vlm-cascade demo") as demo:
        gr.Markdown(
            "# vlm-cascade\nLook cheaply first, then send the VLM only the pixels the "
            "question needs. Every answer shows its evidence and its bill against the "
            "full-resolution baseline."
        )
        if tiny:
            gr.Markdown(
                "**Offline mode (`--tiny`)**: the VLM is a tiny Qwen2-VL with *random "
                "weights* and CLIP is randomly initialised, so VLM answers are random text. "
                "OCR and detector answers are real models, and the evidence and the bill "
                "(visual tokens, FLOPs, time) are real for the architecture.",
                elem_classes=["tiny-note"],
            )
        state = gr.State(None)
        with gr.Row():
            with gr.Column(scale=1):
                files = gr.File(
                    label="Video, images or a PDF",
                    file_count="multiple",
                    file_types=["image", "video", ".pdf"],
                    elem_id="media-input",
                )
                model = gr.Dropdown(models, value=default, label="Pipeline", elem_id="pipeline")
                chosen_note = gr.Markdown(elem_id="pipeline-note")
                question = gr.Textbox(
                    label="Question", placeholder="What does the sign say?", elem_id="question"
                )
                button = gr.Button("Ask", variant="primary", elem_id="ask")
                rows = demo_examples(models, examples_folder)
                gr.Examples(
                    rows,
                    inputs=[files, question, model],
                    label="Examples (generated offline)",
                    elem_id="examples",
                )
            with gr.Column(scale=2):
                answer = gr.Markdown(elem_id="answer")
                route = gr.Markdown(elem_id="route")
                cache = gr.Markdown(elem_id="cache")
                # "contain", not Gradio's default "cover": a receipt must show whole, not as a
                # zoomed strip of its heading. Gallery cells are square, so a fixed column count
                # with a height above one cell keeps a row whole; a click opens the full image.
                where = gr.Gallery(
                    label="Where it looked: high-res tiles (orange), OCR (blue), "
                    "detections (red); click to zoom",
                    columns=2,
                    fit_columns=False,
                    height=440,
                    object_fit="contain",
                    elem_id="overview",
                )
                gallery = gr.Gallery(
                    label="Evidence: what the VLM saw (time, tile, score); click to zoom",
                    columns=4,
                    fit_columns=False,
                    height=250,
                    object_fit="contain",
                    elem_id="evidence-gallery",
                )
                gr.Markdown("#### The bill: this answer vs the full-resolution baseline")
                plot = gr.Plot(show_label=False, elem_id="bill-plot")
                table = gr.Markdown(elem_id="bill-table")
                tools = gr.Markdown(elem_id="tools")
        outputs = [answer, route, cache, gallery, where, plot, table, tools, state]
        files.upload(pick, [files, model], [model, chosen_note])
        button.click(ask, [files, question, model, state], outputs)
        question.submit(ask, [files, question, model, state], outputs)
    demo.files = DemoFiles(demo, [f for row in rows for f in row[0]])
    # Gradio refuses input files that were not uploaded only once an app has "launched"; a mounted
    # app never does, so a client could name any server path and Gradio would copy it into its
    # cache and pass it on. Marked launched, Gradio refuses such paths before `ask` runs.
    demo.has_launched = True
    return demo


def mount_demo(app, engine: Engine, path: str = "/demo") -> None:
    """Mount the demo on the server's FastAPI app at `path`: nothing served from outside its
    uploads and examples (`blocked_paths`, no `allowed_paths`), Gradio's own error texts (which
    name server paths) not shown to clients, uploads capped like the API's (--max-upload-mb)."""
    import gradio as gr

    folder = _examples_dir()
    demo = build_demo(engine, folder)
    gr.mount_gradio_app(
        app,
        demo,
        path=path,
        css=DEMO_CSS,
        allowed_paths=[],
        blocked_paths=blocked_paths(engine, folder),
        show_error=False,
        max_file_size=engine.config.max_upload_bytes,
    )
