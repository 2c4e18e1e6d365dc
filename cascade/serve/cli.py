"""`cascade serve` and `cascade demo`: argparse only here, so `cascade --help` stays fast."""

from __future__ import annotations

import argparse
import sys

from .config import ServeConfig, add_flags, from_args

__all__ = ["add_serve_commands"]

TINY_NOTE = (
    "note: --tiny uses a random-weight tiny Qwen2-VL: VLM answers are random text; OCR/"
    "detector answers, the evidence and the bill (tokens, FLOPs, time) are real"
)


def _common(p: argparse.ArgumentParser, port: int) -> None:
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=port, help=f"port (default {port})")
    add_flags(p)


def _run(args: argparse.Namespace, demo: bool) -> int:
    if getattr(args, "ray", False):
        if args.demo:
            print(
                "cascade serve --ray: the demo is not served on Ray; drop --demo", file=sys.stderr
            )
            return 2
        config: ServeConfig = from_args(args)
        if config.random_weights:
            print(TINY_NOTE, file=sys.stderr)
        from .ray.cli import ray_options
        from .ray.deploy import serve_on_ray  # imports ray only when asked

        return serve_on_ray(args, config, ray_options(args))
    import uvicorn

    from .app import create_app

    config = from_args(args)
    if demo and config.model is None and not config.tiny:
        config = from_args(args, tiny=True)
        print("cascade demo: no --model given, using --tiny", file=sys.stderr)
    if config.random_weights:
        print(TINY_NOTE, file=sys.stderr)
    app = create_app(config, demo=demo or args.demo)
    from ..preflight import check_pipelines  # fail now, with the remedies, not on a request

    check_pipelines(m.qa.pipeline for m in app.state.engine.models.values())
    where = f"http://{args.host}:{args.port}"
    print(
        f"serving {', '.join(app.state.engine.models)} at {where}/v1"
        + (f"; demo at {where}/demo/" if demo or args.demo else ""),
        file=sys.stderr,
    )
    from .stopping import DrainingServer

    DrainingServer(
        uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            log_level="info",
            timeout_graceful_shutdown=config.drain_timeout_s,
        )
    ).run()
    return 0  # stopped by SIGTERM or SIGINT, in-flight requests drained


def _embed(args: argparse.Namespace) -> int:
    """`cascade embed`: image_embeds content parts (JSON) for images, from a VLM's tower."""
    import json

    from ..artifacts import Image
    from ..vlm import VLM, build_tiny_vlm
    from ..vlm.embeds import dump_embeds

    model = str(build_tiny_vlm(size="test")) if args.model == "tiny" else args.model
    vlm = VLM.load(
        model, device=args.device, min_pixels=args.min_pixels, max_pixels=args.max_pixels
    )
    images = [Image.open(p, media_index=i) for i, p in enumerate(args.images)]
    embeds = vlm.image_embeds(images)
    parts = [{"type": "image_embeds", "image_embeds": dump_embeds(e)} for e in embeds]
    text = json.dumps(parts if len(parts) > 1 else parts[0])
    if args.out is None:
        print(text)
    else:
        args.out.write_text(text)
        shapes = ", ".join(str(list(e.embeds.shape)) for e in embeds)
        print(f"wrote {args.out}: {len(parts)} image_embeds part(s) {shapes}", file=sys.stderr)
    return 0


def add_embed_command(sub) -> None:
    from pathlib import Path

    p = sub.add_parser(
        "embed",
        help="image embeddings to send in place of images (image_embeds parts)",
        description="What a VLM's vision tower makes of each image, as image_embeds content "
        "parts (JSON; each tensor base64 of torch.save, as vLLM takes them). A chat request "
        "with such a part is answered as the image would be, by a server running the same "
        "model; the VLM must see the image at the size embedded (a pipeline that shrinks its "
        "images first, e.g. thumbnails, needs embeddings of the shrunk image).",
    )
    p.add_argument("images", nargs="+", type=Path, metavar="IMAGE")
    p.add_argument(
        "--model",
        required=True,
        help="hub id or local folder; 'tiny': the random-weight tiny Qwen2-VL",
    )
    p.add_argument("--device", default="auto", help="cpu, cuda, ... (default auto)")
    p.add_argument(
        "--min-pixels",
        type=int,
        help="the model's image limits, as the served model declares them (its `models:` entry)",
    )
    p.add_argument("--max-pixels", type=int)
    p.add_argument("--out", type=Path, help="JSON file to write (default: standard output)")
    p.set_defaults(func=_embed)


def add_serve_commands(sub) -> None:
    p = sub.add_parser(
        "serve",
        help="OpenAI-compatible HTTP server over the pipelines",
        description="Serve POST /v1/chat/completions (model = cascade/<pipeline>), "
        "GET /v1/models, /health (readiness), /health/live, /metrics and "
        "/openapi.json (the contract).",
    )
    _common(p, 8000)
    p.add_argument("--demo", action="store_true", help="also mount the web demo at /demo")
    from .ray.cli import add_deploy_command, add_ray_flags  # argparse only

    add_ray_flags(p)
    p.set_defaults(func=lambda a: _run(a, demo=False))

    p = sub.add_parser(
        "demo",
        help="web demo (Gradio) on the same server",
        description="Upload a video or images, ask, see the answer with its "
        "evidence and bill. Without --model it uses --tiny.",
    )
    _common(p, 7860)
    p.set_defaults(func=lambda a: _run(a, demo=True), demo=True)

    add_deploy_command(sub)
    add_embed_command(sub)
