"""`cascade serve` and `cascade demo`: argparse only here, so `cascade --help` stays fast."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .config import ServeConfig

__all__ = ["add_serve_commands", "config_from_args"]

TINY_NOTE = ("note: --tiny uses a random-weight tiny Qwen2-VL: VLM answers are random text; OCR/"
             "detector answers, the evidence and the bill (tokens, FLOPs, time) are real")


def _common(p: argparse.ArgumentParser, port: int) -> None:
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=port)
    m = p.add_mutually_exclusive_group()
    m.add_argument("--model", help="VLM for every vlm_answer stage: hub id or local folder "
                   "('tiny' = --tiny)")
    m.add_argument("--tiny", action="store_true", help="random-weight tiny Qwen2-VL and random "
                   "CLIP: runs offline; VLM answers are random text, tool answers/evidence/bill real")
    p.add_argument("--device", help="cpu, cuda, cuda:1 ... for every stage that has a device")
    p.add_argument("--pipeline", action="append", default=[], metavar="NAME=YAML",
                   help="also serve a YAML pipeline as model cascade/NAME (repeatable)")
    p.add_argument("--no-shipped", action="store_true", help="serve only --pipeline pipelines")
    p.add_argument("--media-root", type=Path, help="folder file:// URLs may read from "
                   "(default: file URLs refused)")
    p.add_argument("--upload-dir", type=Path, help="where uploaded videos live while a request "
                   "uses them; deleted after (default: a private temporary folder)")
    p.add_argument("--max-upload-mb", type=float, default=64.0, help="largest media upload (MiB)")
    p.add_argument("--max-frames", type=int, default=3000,
                   help="most frames in a video / images in a request")
    p.add_argument("--max-pixels", type=int, default=4096 * 4096, help="most pixels per image/frame")
    p.add_argument("--max-total-pixels", type=int, default=1 << 31,
                   help="most pixels one request may make the server decode: every image's and "
                   "every video frame's width x height, summed (413 beyond; default 2^31)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds before a request gets 504")
    p.add_argument("--upload-timeout", type=float, default=60.0,
                   help="seconds for a request body to arrive; a slower upload gets 408")
    p.add_argument("--send-timeout", type=float, default=30.0,
                   help="seconds a streamed chunk may wait for its client to read; then the "
                   "stream is dropped and its decode cancelled")
    p.add_argument("--max-concurrent", type=int, default=4,
                   help="requests in progress at once; more wait in the queue")
    p.add_argument("--max-queue", type=int, default=64,
                   help="requests waiting for a slot (in arrival order); more get 429 + Retry-After")
    p.add_argument("--workers", type=int, default=2, help="threads running pipelines")


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    from ..errors import CascadeError

    pipelines = {}
    for item in args.pipeline:
        name, eq, path = item.partition("=")
        if not eq or not name or not path:
            raise CascadeError(f"--pipeline '{item}': expected NAME=path/to/pipeline.yaml")
        pipelines[name] = path
    return ServeConfig(model=args.model, tiny=args.tiny, device=args.device, pipelines=pipelines,
                       shipped=not args.no_shipped, media_root=args.media_root,
                       upload_dir=args.upload_dir,
                       max_upload_bytes=int(args.max_upload_mb * (1 << 20)),
                       max_frames=args.max_frames, max_pixels=args.max_pixels,
                       max_total_pixels=args.max_total_pixels, request_timeout_s=args.timeout,
                       upload_timeout_s=args.upload_timeout, send_timeout_s=args.send_timeout,
                       max_concurrent=args.max_concurrent,
                       max_queue=args.max_queue, workers=args.workers)


def _run(args: argparse.Namespace, demo: bool) -> int:
    if getattr(args, "ray", False):
        if args.demo:
            print("cascade serve --ray: the demo is not served on Ray; drop --demo", file=sys.stderr)
            return 2
        config = config_from_args(args)
        if config.random_weights:
            print(TINY_NOTE, file=sys.stderr)
        from .ray.cli import ray_options
        from .ray.deploy import serve_on_ray  # imports ray only when asked

        return serve_on_ray(args, config, ray_options(args))
    import uvicorn

    from .app import create_app

    if demo and not args.model and not args.tiny:
        args.tiny = True
        print("cascade demo: no --model given, using --tiny", file=sys.stderr)
    config = config_from_args(args)
    if config.random_weights:
        print(TINY_NOTE, file=sys.stderr)
    app = create_app(config, demo=demo or args.demo)
    from ..preflight import check_pipelines  # fail now, with the remedies, not on a request

    check_pipelines(m.qa.pipeline for m in app.state.engine.models.values())
    where = f"http://{args.host}:{args.port}"
    print(f"serving {', '.join(app.state.engine.models)} at {where}/v1"
          + (f"; demo at {where}/demo/" if demo or args.demo else ""), file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0


def add_serve_commands(sub) -> None:
    p = sub.add_parser("serve", help="OpenAI-compatible HTTP server over the pipelines",
                       description="Serve POST /v1/chat/completions (model = cascade/<pipeline>), "
                       "GET /v1/models, /health (readiness), /health/live, /metrics and "
                       "/openapi.json (the contract).")
    _common(p, 8000)
    p.add_argument("--demo", action="store_true", help="also mount the web demo at /demo")
    from .ray.cli import add_deploy_command, add_ray_flags  # argparse only

    add_ray_flags(p)
    p.set_defaults(func=lambda a: _run(a, demo=False))

    p = sub.add_parser("demo", help="web demo (Gradio) on the same server",
                       description="Upload a video or images, ask, see the answer with its "
                       "evidence and bill. Without --model it uses --tiny.")
    _common(p, 7860)
    p.set_defaults(func=lambda a: _run(a, demo=True), demo=True)

    add_deploy_command(sub)
