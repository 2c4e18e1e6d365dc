"""`cascade serve --ray` and `cascade deploy`: a running application, or a Serve config for one.

Imports Ray only inside `serve_on_ray`, so `cascade deploy` writes its config without it.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
from typing import Any

from ...pipeline import Pipeline
from ..config import ServeConfig
from .options import APP_NAME, INGRESS, DeployLayout, RayOptions, app_args, serving_of

__all__ = ["serve_on_ray", "deploy_config", "local_cluster_cpus", "BUILDER"]

BUILDER = "cascade.serve.ray.app:build_app"  # what a Serve config's import_path names


def local_cluster_cpus(options: RayOptions) -> int:
    """Logical CPUs for a local cluster: the machine's, or enough for every replica's `num_cpus`
    (Ray's CPUs are scheduling units; torch threads are set apart, `--threads`)."""
    need = options.cpus(INGRESS) + sum(
        options.cpus(t) * options.replicas_of(t) for t in options.remote_types()
    )
    return max(os.cpu_count() or 1, math.ceil(need))


def serve_on_ray(args: argparse.Namespace, config: ServeConfig, options: RayOptions) -> int:
    """`cascade serve --ray`: start (or join) a cluster, run the application with `config` and
    `options` until SIGTERM or SIGINT; then drain the requests in flight (--drain-timeout),
    shut Serve and Ray down and return 0."""
    import ray
    from ray import serve

    from ..stopping import StopSignals, drain
    from .app import build_app

    if args.address:
        ray.init(address=args.address)
    else:
        # "local": a cluster of its own, even where `ray start` left one to join on this machine
        ray.init(address="local", num_cpus=local_cluster_cpus(options), include_dashboard=False)
    try:
        # Caught from here, not from serve.run's return: replicas answer before serve.run
        # returns, and a ^C then must still stop cleanly (after ray.init: it sets SIGTERM's).
        with StopSignals() as stop:
            serve.start(http_options={"host": args.host, "port": args.port})
            serve.run(build_app(app_args(config, options)), name=APP_NAME, route_prefix="/")
            where = f"http://{args.host}:{args.port}"
            print(
                f"serving on Ray Serve at {where}/v1 ({options.replicas} VLM replicas); "
                f"GET {where}/health for replicas; ^C stops",
                file=sys.stderr,
            )
            sig = stop.wait()
        local = where.replace("://0.0.0.0:", "://127.0.0.1:")
        drained = drain(local, config.drain_timeout_s)
        print(
            f"{signal.Signals(sig).name}: "
            + ("drained" if drained else f"not drained within {config.drain_timeout_s:g} s")
            + "; stopping Ray Serve",
            file=sys.stderr,
        )
        return 0
    finally:
        serve.shutdown()
        ray.shutdown()


def deploy_config(
    pipelines: dict[str, str],
    config: ServeConfig | None = None,
    options: RayOptions | None = None,
    layout: DeployLayout | None = None,
) -> dict[str, Any]:
    """A Ray Serve config (`ServeDeploySchema`) serving `pipelines` (name -> shipped name or
    YAML path): the application builder with its args (`config` with these pipelines only, and
    `options` with each deployment's CPUs from `layout`), and one entry per deployment used by
    the pipelines: autoscaling for the heavy stages (`layout`), resources for all."""
    config = (config or ServeConfig()).model_copy(
        update={"pipelines": dict(pipelines), "shipped": False}
    )
    options, layout = options or RayOptions(), layout or DeployLayout()
    used: set[str] = set()
    for source in pipelines.values():
        used |= {st.type for st in Pipeline.load(source).spec.stages.values()}
    heavy = [t for t in options.remote_types() if t in used]
    cpus = {INGRESS: layout.ingress_cpus} | {
        t: layout.vlm_cpus if serving_of(t).pool == "model" else layout.stage_cpus for t in heavy
    }
    options = options.model_copy(update={"num_cpus": cpus})
    deployments: list[dict[str, Any]] = [
        {"name": INGRESS, "num_replicas": 1, "ray_actor_options": {"num_cpus": cpus[INGRESS]}}
    ]
    for t in heavy:
        actor: dict[str, Any] = {"num_cpus": cpus[t]}
        if options.gpus(t):
            actor["num_gpus"] = options.gpus(t)
        deployments.append(
            {
                "name": t,
                "max_ongoing_requests": max(8, 2 * options.max_batch_size),
                "autoscaling_config": {
                    "min_replicas": layout.min_replicas,
                    "max_replicas": layout.max_replicas,
                    "target_ongoing_requests": layout.target_ongoing,
                },
                "ray_actor_options": actor,
            }
        )
    return {
        "proxy_location": "EveryNode",
        "http_options": {"host": layout.host, "port": layout.port},
        "applications": [
            {
                "name": layout.name,
                "route_prefix": layout.route_prefix,
                "import_path": BUILDER,
                "args": app_args(config, options),
                "deployments": deployments,
            }
        ],
    }
