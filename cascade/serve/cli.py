"""`cascade serve` and `cascade demo`: argparse only here, so `cascade --help` stays fast."""

from __future__ import annotations

import argparse
import sys

from .config import add_flags, from_args

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
        config = from_args(args)
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
