"""`cascade serve --ray` and `cascade deploy`: a running application, or a Serve config for one.

Imports Ray only inside `serve_on_ray`, so `cascade deploy` writes its config without it.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Any

from ...pipeline import Pipeline
from ..config import ServeConfig
from .options import APP_NAME, INGRESS, RayOptions, app_args, serving_of

__all__ = ["serve_on_ray", "deploy_config", "local_cluster_cpus", "BUILDER"]

BUILDER = "cascade.serve.ray.app:build_app"  # what a Serve config's import_path names


def local_cluster_cpus(options: RayOptions) -> int:
    """Logical CPUs for a local cluster: the machine's, or enough for every replica's `num_cpus`
    (Ray's CPUs are scheduling units; torch threads are set apart, `--threads`)."""
    need = options.cpus(INGRESS) + sum(options.cpus(t) * options.replicas_of(t)
                                       for t in options.remote_types())
    return max(os.cpu_count() or 1, math.ceil(need))


def serve_on_ray(args: argparse.Namespace, config: ServeConfig, options: RayOptions) -> int:
    """`cascade serve --ray`: start (or join) a cluster, run the application with `config` and
    `options`, block until ^C."""
    import ray
    from ray import serve

    from .app import build_app

    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(num_cpus=local_cluster_cpus(options), include_dashboard=False)
    try:
        serve.start(http_options={"host": args.host, "port": args.port})
        serve.run(build_app(app_args(config, options)), name=APP_NAME, route_prefix="/")
        where = f"http://{args.host}:{args.port}"
        print(f"serving on Ray Serve at {where}/v1 ({options.replicas} VLM replicas); "
              f"GET {where}/health for replicas; ^C stops", file=sys.stderr)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        serve.shutdown()
        ray.shutdown()


def deploy_config(pipelines: dict[str, str], *, tiny: bool = False, model: str | None = None,
                  device: str | None = None, min_replicas: int = 1, max_replicas: int = 4,
                  target_ongoing: float = 2.0, vlm_cpus: float = 1.0, vlm_gpus: float = 0.0,
                  stage_cpus: float = 0.5, ingress_cpus: float = 0.5, max_batch_size: int = 4,
                  name: str = "cascade", route_prefix: str = "/", host: str = "0.0.0.0",
                  port: int = 8000) -> dict[str, Any]:
    """A Ray Serve config (`ServeDeploySchema`) serving `pipelines` (name -> shipped name or
    YAML path): the application builder with its args, and one entry per deployment: autoscaling
    for the heavy stages, resources for all. vlm_*: per replica of a "model"-pool stage type (the
    VLM); stage_cpus: of every other heavy one."""
    used: set[str] = set()
    for source in pipelines.values():
        used |= {st.type for st in Pipeline.load(source).spec.stages.values()}
    options = RayOptions()
    args = {"pipelines": dict(pipelines), "shipped": False, "tiny": tiny, "model": model,
            "device": device, "max_batch_size": max_batch_size, "model_gpus": vlm_gpus,
            "num_cpus": {INGRESS: ingress_cpus}}
    deployments: list[dict[str, Any]] = [
        {"name": INGRESS, "num_replicas": 1, "ray_actor_options": {"num_cpus": ingress_cpus}}]
    for t in options.remote_types():
        if t not in used:
            continue
        model_pool = serving_of(t).pool == "model"
        cpus = args["num_cpus"][t] = vlm_cpus if model_pool else stage_cpus
        actor: dict[str, Any] = {"num_cpus": cpus}
        if model_pool and vlm_gpus:
            actor["num_gpus"] = vlm_gpus
        deployments.append({
            "name": t, "max_ongoing_requests": max(8, 2 * max_batch_size),
            "autoscaling_config": {"min_replicas": min_replicas, "max_replicas": max_replicas,
                                   "target_ongoing_requests": target_ongoing},
            "ray_actor_options": actor})
    return {"proxy_location": "EveryNode", "http_options": {"host": host, "port": port},
            "applications": [{"name": name, "route_prefix": route_prefix,
                              "import_path": BUILDER, "args": args,
                              "deployments": deployments}]}
