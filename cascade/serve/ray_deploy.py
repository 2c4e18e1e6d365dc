"""`cascade serve --ray` and `cascade deploy`: the Ray Serve application from the command line.

    cascade serve --ray --replicas 2 --tiny                  # local Ray cluster, 2 VLM replicas
    cascade serve --ray --address ray://head:10001 ...        # an existing cluster (Ray Client)
    cascade deploy video_qa --out serve_config.yaml           # a config for `serve run` / `serve deploy`

Argparse and YAML only at import: `ray` is imported when a command needs it.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import ServeConfig

__all__ = ["add_ray_flags", "serve_on_ray", "add_deploy_command", "deploy_config",
           "local_cluster_cpus"]


def add_ray_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("Ray Serve (--ray)")
    g.add_argument("--ray", action="store_true", help="serve on Ray Serve: heavy stages (VLM, OCR, "
                   "detector, encoders) as deployments with their own replicas")
    g.add_argument("--replicas", type=int, default=1, help="VLM replicas (default 1)")
    g.add_argument("--stage-replicas", type=int, default=1,
                   help="replicas of each other heavy stage deployment (default 1)")
    g.add_argument("--address", help="Ray cluster to join: auto (a running local cluster) or "
                   "ray://host:10001 (Ray Client); default: start a local cluster")
    g.add_argument("--vlm-gpus", type=float, default=0.0,
                   help="GPUs per VLM replica (a fraction shares one GPU; default 0)")
    g.add_argument("--threads", type=int, default=None,
                   help="torch threads per replica (default: Ray's, from the replica's CPUs)")
    g.add_argument("--max-batch-size", type=int, default=4, help="VLM @serve.batch size")
    g.add_argument("--batch-wait-ms", type=float, default=10.0, help="VLM @serve.batch wait")


def _options(args: argparse.Namespace):
    from .ray_app import RayOptions

    return RayOptions(replicas=args.replicas, stage_replicas=args.stage_replicas,
                      num_gpus={"vlm_answer": args.vlm_gpus} if args.vlm_gpus else {},
                      threads=args.threads, max_batch_size=args.max_batch_size,
                      batch_wait_timeout_s=args.batch_wait_ms / 1000.0)


def local_cluster_cpus(options) -> int:
    """Logical CPUs for a local cluster: the machine's, or enough for every replica's `num_cpus`
    (Ray's CPUs are scheduling units; torch threads are set apart, `--threads`)."""
    from .ray_app import HEAVY_STAGES

    need = options.cpus("ingress") + sum(options.cpus(t) * options.replicas_of(t)
                                         for t in HEAVY_STAGES)
    return max(os.cpu_count() or 1, math.ceil(need))


def serve_on_ray(args: argparse.Namespace, config: ServeConfig) -> int:
    """`cascade serve --ray`: start (or join) a cluster, run the application with `config` (the
    server settings `cascade.serve.cli` read from `args`), block until ^C."""
    import ray
    from ray import serve

    from .ray_app import APP_NAME, app_args, build_app

    options = _options(args)
    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(num_cpus=local_cluster_cpus(options), include_dashboard=False)
    try:
        serve.start(http_options={"host": args.host, "port": args.port})
        serve.run(build_app(app_args(config, options)), name=APP_NAME, route_prefix="/")
        where = f"http://{args.host}:{args.port}"
        print(f"serving on Ray Serve at {where}/v1 ({args.replicas} VLM replicas); "
              f"GET {where}/health for replicas; ^C stops", file=sys.stderr)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        serve.shutdown()
        ray.shutdown()


# -- cascade deploy ------------------------------------------------------------------------------
def deploy_config(pipelines: dict[str, str], *, tiny: bool = False, model: str | None = None,
                  device: str | None = None, min_replicas: int = 1, max_replicas: int = 4,
                  target_ongoing: float = 2.0, vlm_cpus: float = 1.0, vlm_gpus: float = 0.0,
                  stage_cpus: float = 0.5, ingress_cpus: float = 0.5, max_batch_size: int = 4,
                  name: str = "cascade", route_prefix: str = "/", host: str = "0.0.0.0",
                  port: int = 8000) -> dict[str, Any]:
    """A Ray Serve config (`ServeDeploySchema`) serving `pipelines` (name -> shipped name or
    YAML path): the application builder `cascade.serve.ray_app:build_app` with its args, and one
    entry per deployment: autoscaling for the heavy stages, resources for all."""
    from ..pipeline import Pipeline
    from .ray_app import HEAVY_STAGES

    used: set[str] = set()
    for source in pipelines.values():
        used |= {st.type for st in Pipeline.load(source).spec.stages.values()}
    args = {"pipelines": dict(pipelines), "shipped": False, "tiny": tiny, "model": model,
            "device": device, "max_batch_size": max_batch_size,
            "num_cpus": {"ingress": ingress_cpus, "vlm_answer": vlm_cpus},
            "num_gpus": {"vlm_answer": vlm_gpus} if vlm_gpus else {}}
    deployments: list[dict[str, Any]] = [
        {"name": "ingress", "num_replicas": 1, "ray_actor_options": {"num_cpus": ingress_cpus}}]
    for t in HEAVY_STAGES:
        if t not in used:
            continue
        cpus = vlm_cpus if t == "vlm_answer" else stage_cpus
        if t != "vlm_answer":
            args["num_cpus"][t] = stage_cpus
        actor: dict[str, Any] = {"num_cpus": cpus}
        if t == "vlm_answer" and vlm_gpus:
            actor["num_gpus"] = vlm_gpus
        deployments.append({
            "name": t, "max_ongoing_requests": max(8, 2 * max_batch_size),
            "autoscaling_config": {"min_replicas": min_replicas, "max_replicas": max_replicas,
                                   "target_ongoing_requests": target_ongoing},
            "ray_actor_options": actor})
    return {"proxy_location": "EveryNode", "http_options": {"host": host, "port": port},
            "applications": [{"name": name, "route_prefix": route_prefix,
                              "import_path": "cascade.serve.ray_app:build_app", "args": args,
                              "deployments": deployments}]}


def _deploy(args: argparse.Namespace) -> int:
    import yaml

    from ..pipeline import resolve_pipeline_path

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
    m.add_argument("--model", help="VLM for every vlm_answer stage: hub id or local folder")
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
