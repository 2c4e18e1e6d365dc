"""The Ray flags of `cascade serve` and the `cascade deploy` command (argparse only: Ray is
imported when a command runs).

    cascade serve --ray --replicas 2 --tiny            # local Ray cluster, 2 VLM replicas
    cascade serve --ray --address ray://head:10001 ...  # an existing cluster (Ray Client)
    cascade deploy video_qa --out serve_config.yaml     # a config for `serve run` / `serve deploy`
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..config import add_flags, from_args
from .options import DeployLayout, RayOptions

__all__ = ["add_ray_flags", "ray_options", "add_deploy_command"]


def add_ray_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("Ray Serve (--ray)")
    g.add_argument(
        "--ray",
        action="store_true",
        help="serve on Ray Serve: heavy stages (VLM, OCR, "
        "detector, encoders) as deployments with their own replicas",
    )
    g.add_argument(
        "--address",
        help="Ray cluster to join: auto (a running local cluster) or "
        "ray://host:10001 (Ray Client); default: start a local cluster",
    )
    add_flags(g, RayOptions)


def ray_options(args: argparse.Namespace) -> RayOptions:
    """The layout `cascade serve --ray`'s flags (and `CASCADE_RAY_*` variables) ask for."""
    return from_args(args, RayOptions)


def _deploy(args: argparse.Namespace) -> int:
    import yaml

    from ...pipeline import resolve_pipeline_path
    from .deploy import deploy_config

    pipelines = {}
    for src in args.sources:
        path = resolve_pipeline_path(src)
        shipped = not Path(src).suffix and not Path(src).exists()
        pipelines[path.stem] = src if shipped else str(Path(path).resolve())
    cfg = deploy_config(
        pipelines, from_args(args), from_args(args, RayOptions), from_args(args, DeployLayout)
    )
    text = (
        "# Ray Serve config written by `cascade deploy`; run with `serve run "
        + f"{args.out.name}` (or `serve deploy` on a cluster). YAML paths must exist on every "
        "node.\n" + yaml.safe_dump(cfg, sort_keys=False)
    )
    args.out.write_text(text)
    print(
        f"wrote {args.out}: {', '.join(d['name'] for d in cfg['applications'][0]['deployments'])}",
        file=sys.stderr,
    )
    return 0


def add_deploy_command(sub) -> None:
    p = sub.add_parser(
        "deploy",
        help="write a Ray Serve config for pipelines",
        description="Write a Ray Serve config (`serve run` / `serve deploy`) "
        "serving the pipelines: heavy stages as autoscaled deployments. Every "
        "server setting of `cascade serve` goes into the application's args.",
    )
    p.add_argument("sources", nargs="+", metavar="PIPELINE", help="YAML file or shipped name")
    p.add_argument(
        "--out",
        type=Path,
        default=Path("serve_config.yaml"),
        help="where to write the config (default serve_config.yaml)",
    )
    add_flags(
        p.add_argument_group("server settings (the application's args)"),
        exclude=frozenset({"pipelines", "shipped"}),
    )
    add_flags(
        p.add_argument_group("VLM replicas"),
        RayOptions,
        exclude=frozenset({"replicas", "stage_replicas"}),
    )
    add_flags(p.add_argument_group("deployments"), DeployLayout)
    p.set_defaults(func=_deploy)
