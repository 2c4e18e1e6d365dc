"""`build_app(args)`: the Serve application, an application builder `serve run` can import.

The ingress and one deployment per heavy stage type the served pipelines use (`RayOptions`:
`remote_stages`, default every type whose class declares `serving.heavy`). Deployment names:
`ingress` and the stage type names, which a Serve config's `deployments:` entries override
(replicas, autoscaling, resources). A model declared with `serve.disaggregate: pd | epd` adds its
prefill (and encode) deployments, `<model>_prefill` / `<model>_encode` (`cascade.serve.ray.roles`);
its VLM stage's deployment is its decode side.
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
from .options import INGRESS, RayOptions, app_args, option_args, split_args
from .replica import StageReplica
from .roles import RoleReplica, disaggregated_models

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
    roles, role_names = role_deployments(found, options, health, config.random_weights)
    handles = {}
    for stage_type in options.remote_types():
        if stage_type not in found:
            continue
        # Ray types `deployment` as its decorator form; given a class it is the Deployment
        dep = cast(Deployment, serve.deployment(StageReplica)).options(
            name=stage_type,
            num_replicas=decode_replicas(found[stage_type]) or options.replicas_of(stage_type),
            max_ongoing_requests=max(8, 2 * options.max_batch_size),
            **health,
            ray_actor_options={
                "num_cpus": options.cpus(stage_type),
                "num_gpus": options.gpus(stage_type),
            },
        )
        handles[stage_type] = dep.bind(
            stage_type, found[stage_type], option_args(options), config.random_weights, roles
        )
    ingress = cast(Deployment, serve.deployment(serve.ingress()(Ingress))).options(
        name=INGRESS,
        num_replicas=1,
        max_ongoing_requests=max(16, 2 * config.max_concurrent + config.max_queue),
        **health,
        ray_actor_options={"num_cpus": options.cpus(INGRESS), "num_gpus": 0},
    )
    return ingress.bind(app_args(config, options), handles, role_names)


def decode_replicas(configs: dict[str, dict[str, Any]]) -> int | None:
    """The replicas a stage deployment's disaggregated models ask of their decode side (the
    most any asks; None: none asks)."""
    asked = [
        roles.decode_replicas
        for _, _, roles in disaggregated_models({"": configs}).values()
        if roles.decode_replicas is not None
    ]
    return max(asked, default=None)


def role_deployments(
    found: dict[str, dict[str, dict[str, Any]]],
    options: RayOptions,
    health: dict[str, Any],
    tiny: bool,
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The encode / prefill deployments of every disaggregated model (`<model>_<role>`, e.g.
    `vlm_prefill`): their bound handles by `model_key` and role, and their names."""
    handles: dict[str, dict[str, Any]] = {}
    names: list[str] = []
    for key, (model, spec, roles) in disaggregated_models(found).items():
        for role in roles.roles:
            name = f"{model}_{role}"
            while name in names:  # two pipelines' models of one name
                name += "_"
            names.append(name)
            dep = cast(Deployment, serve.deployment(RoleReplica)).options(
                name=name,
                num_replicas=roles.encode_replicas if role == "encode" else roles.prefill_replicas,
                **health,
                ray_actor_options={
                    "num_cpus": float(options.num_cpus.get(name, 1.0)),
                    "num_gpus": float(options.num_gpus.get(name, options.model_gpus or 0)),
                },
            )
            handles.setdefault(key, {})[role] = dep.bind(role, spec, option_args(options), tiny)
    return handles, names
