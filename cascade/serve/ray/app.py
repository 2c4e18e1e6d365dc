"""`build_app(args)`: the Serve application, an application builder `serve run` can import.

The ingress and one deployment per heavy stage type the served pipelines use (`RayOptions`:
`remote_stages`, default every type whose class declares `serving.heavy`). Deployment names:
`ingress` and the stage type names, which a Serve config's `deployments:` entries override
(replicas, autoscaling, resources).
"""

from __future__ import annotations

import importlib
from typing import Any, cast

from ray import serve
from ray.serve import Deployment

from ..config import ServeConfig
from ..engine import Engine
from .configs import stage_config, stage_key
from .ingress import Ingress
from .options import INGRESS, app_args, option_args, split_args
from .replica import StageReplica

__all__ = ["build_app", "served_stages"]


def served_stages(config: ServeConfig) -> dict[str, dict[str, dict[str, Any]]]:
    """Stage type -> configuration key -> configuration, over every served pipeline (loads the
    pipelines as the ingress will: validation only, no weights)."""
    engine = Engine(config, load_models=False)
    try:
        found: dict[str, dict[str, dict[str, Any]]] = {}
        for served in engine.models.values():
            for st in served.qa.pipeline.stages.values():
                cfg = stage_config(st)
                found.setdefault(st.type_name, {})[stage_key(cfg)] = cfg
        return found
    finally:
        engine.close()


def build_app(args: dict[str, Any] | None = None):
    """The Serve application for `args` (`app_args`; in a Serve config, the `args:` mapping)."""
    config, options = split_args(args)
    for mod in options.imports:
        importlib.import_module(mod)
    found = served_stages(config)
    health: dict[str, Any] = (  # extra keyword arguments of Deployment.options
        {}
        if options.health_check_period_s is None
        else {"health_check_period_s": options.health_check_period_s}
    )
    handles = {}
    for stage_type in options.remote_types():
        if stage_type not in found:
            continue
        # Ray types `deployment` as its decorator form; given a class it is the Deployment
        dep = cast(Deployment, serve.deployment(StageReplica)).options(
            name=stage_type,
            num_replicas=options.replicas_of(stage_type),
            max_ongoing_requests=max(8, 2 * options.max_batch_size),
            **health,
            ray_actor_options={
                "num_cpus": options.cpus(stage_type),
                "num_gpus": options.gpus(stage_type),
            },
        )
        handles[stage_type] = dep.bind(
            stage_type, found[stage_type], option_args(options), config.random_weights
        )
    ingress = cast(Deployment, serve.deployment(serve.ingress()(Ingress))).options(
        name=INGRESS,
        num_replicas=1,
        max_ongoing_requests=max(16, 2 * config.max_concurrent + config.max_queue),
        **health,
        ray_actor_options={"num_cpus": options.cpus(INGRESS), "num_gpus": 0},
    )
    return ingress.bind(app_args(config, options), handles)
