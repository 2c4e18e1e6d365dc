"""The Ray flags of `cascade serve` and the `cascade deploy` command (argparse only: Ray is
imported when a command runs).

    cascade serve --ray --replicas 2 --tiny                  # local Ray cluster, 2 VLM replicas
    cascade serve --ray --address ray://head:10001 ...        # an existing cluster (Ray Client)
    cascade deploy video_qa --out serve_config.yaml           # a config for `serve run` / `serve deploy`
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..config import add_flags, from_args
from .options import RayOptions

__all__ = ["add_ray_flags", "ray_options", "add_deploy_command"]


def add_ray_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("Ray Serve (--ray)")
    g.add_argument("--ray", action="store_true", help="serve on Ray Serve: heavy stages (VLM, OCR, "
                   "detector, encoders) as deployments with their own replicas")
    g.add_argument("--address", help="Ray cluster to join: auto (a running local cluster) or "
                   "ray://host:10001 (Ray Client); default: start a local cluster")
    add_flags(g, RayOptions)


def ray_options(args: argparse.Namespace) -> RayOptions:
    """The layout `cascade serve --ray`'s flags (and `CASCADE_RAY_*` variables) ask for."""
    return from_args(args, RayOptions)


def _deploy(args: argparse.Namespace) -> int:
    import yaml

    from ...pipeline import resolve_pipeline_path
    from .deploy import deploy_config

    pipelines = {}
    for src in args.pipelines:
        path = resolve_pipeline_path(src)
        shipped = not Path(src).suffix and not Path(src).exists()
        pipelines[path.stem] = src if shipped else str(Path(path).resolve())
    cfg = deploy_config(pipelines, tiny=args.tiny, model=args.model, device=args.device,
                        min_replicas=args.min_replicas, max_replicas=args.max_replicas,
                        target_ongoing=args.target_ongoing, vlm_cpus=args.vlm_cpus,
                        vlm_gpus=args.vlm_gpus, stage_cpus=args.stage_cpus, name=args.name,
                        route_prefix=args.route_prefix, port=args.port)
    text = ("# Ray Serve config written by `cascade deploy`; run with `serve run " +
            f"{args.out.name}` (or `serve deploy` on a cluster). YAML paths must exist on every "
            "node.\n" + yaml.safe_dump(cfg, sort_keys=False))
    args.out.write_text(text)
    print(f"wrote {args.out}: {', '.join(d['name'] for d in cfg['applications'][0]['deployments'])}",
          file=sys.stderr)
    return 0


def add_deploy_command(sub) -> None:
    p = sub.add_parser("deploy", help="write a Ray Serve config for pipelines",
                       description="Write a Ray Serve config (`serve run` / `serve deploy`) "
                       "serving the pipelines: heavy stages as autoscaled deployments.")
    p.add_argument("pipelines", nargs="+", metavar="PIPELINE", help="YAML file or shipped name")
    p.add_argument("--out", type=Path, default=Path("serve_config.yaml"))
    m = p.add_mutually_exclusive_group()
    m.add_argument("--model", help="the pipelines' VLM: hub id or local folder")
    m.add_argument("--tiny", action="store_true", help="random-weight tiny models (offline)")
    p.add_argument("--device", help="cpu, cuda ... for every stage that has a device")
    p.add_argument("--min-replicas", type=int, default=1)
    p.add_argument("--max-replicas", type=int, default=4)
    p.add_argument("--target-ongoing", type=float, default=2.0,
                   help="autoscaling target of ongoing requests per replica")
    p.add_argument("--vlm-cpus", type=float, default=1.0)
    p.add_argument("--vlm-gpus", type=float, default=0.0, help="GPUs per VLM replica (fractions share)")
    p.add_argument("--stage-cpus", type=float, default=0.5, help="CPUs per other heavy replica")
    p.add_argument("--name", default="cascade", help="application name")
    p.add_argument("--route-prefix", default="/")
    p.add_argument("--port", type=int, default=8000)
    p.set_defaults(func=_deploy)
