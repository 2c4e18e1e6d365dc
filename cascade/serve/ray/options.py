"""How the application is laid out on the cluster, and `build_app`'s args (plain YAML values).

Argparse-free and Ray-free: `cascade deploy` and the CLI read it without importing Ray.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ...errors import CascadeError, did_you_mean
from ...registry import get_stage_class, heavy_stage_types
from ...stage import Serving
from ..config import ServeConfig

__all__ = ["APP_NAME", "INGRESS", "RayOptions", "app_args", "option_args", "split_args",
           "serving_of"]

APP_NAME = "cascade"
INGRESS = "ingress"  # the HTTP ingress deployment's name; the others are stage type names
_INGRESS_SERVING = Serving(num_cpus=0.5)


def serving_of(deployment: str) -> Serving:
    """The serving traits of a deployment: the ingress's, or its stage type's."""
    return _INGRESS_SERVING if deployment == INGRESS else get_stage_class(deployment).serving


@dataclass
class RayOptions:
    """How the application is laid out on the cluster (the `args` of `build_app` besides the
    `ServeConfig` fields).

    replicas: replicas of each "model"-pool deployment (the VLM); stage_replicas: of every other
    heavy deployment. model_gpus: GPUs per "model"-pool replica. num_cpus / num_gpus: Ray
    resources per replica, by deployment name (unnamed: the stage type's `serving`, the ingress
    0.5 CPU). threads: torch threads per replica (None: torch's default, which Ray sets from
    num_cpus). remote_stages: the stage types that run in deployments (None: every registered
    heavy type). imports: modules each replica imports first (stage plugins). max_batch_size /
    batch_wait_timeout_s: `@serve.batch` of the batchable deployments. retries: how often a call
    whose replica died is sent again. call_timeout_s: longest wait for one stage call.
    """

    replicas: int = 1
    stage_replicas: int = 1
    model_gpus: float = 0.0
    num_cpus: dict[str, float] = field(default_factory=dict)
    num_gpus: dict[str, float] = field(default_factory=dict)
    threads: int | None = None
    remote_stages: tuple[str, ...] | None = None
    imports: tuple[str, ...] = ()
    max_batch_size: int = 4
    batch_wait_timeout_s: float = 0.01
    retries: int = 2
    call_timeout_s: float = 600.0
    health_check_period_s: float | None = None  # Serve's default (10 s) when None

    def remote_types(self) -> tuple[str, ...]:
        """The stage types that run in deployments (`imports` must have been imported)."""
        return heavy_stage_types() if self.remote_stages is None else self.remote_stages

    def cpus(self, deployment: str) -> float:
        return float(self.num_cpus.get(deployment, serving_of(deployment).num_cpus))

    def gpus(self, deployment: str) -> float:
        if deployment in self.num_gpus:
            return float(self.num_gpus[deployment])
        serving = serving_of(deployment)
        return self.model_gpus if serving.pool == "model" and self.model_gpus else serving.num_gpus

    def replicas_of(self, deployment: str) -> int:
        return self.replicas if serving_of(deployment).pool == "model" else self.stage_replicas


_CONFIG_FIELDS = set(ServeConfig.model_fields)
_OPTION_FIELDS = {f.name for f in dataclasses.fields(RayOptions)}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else dict(value) if isinstance(value, dict) else value


def app_args(config: ServeConfig, options: RayOptions | None = None) -> dict[str, Any]:
    """`build_app`'s args (plain YAML/JSON values) for a server config and a layout."""
    return config.model_dump(mode="json") | option_args(options or RayOptions())


def option_args(options: RayOptions) -> dict[str, Any]:
    """The `RayOptions` part of `app_args` (what each replica gets)."""
    return {f.name: _plain(getattr(options, f.name)) for f in dataclasses.fields(RayOptions)}


def split_args(args: dict[str, Any] | None) -> tuple[ServeConfig, RayOptions]:
    """The `ServeConfig` and `RayOptions` in `build_app`'s args (unknown keys are errors)."""
    args = dict(args or {})
    unknown = sorted(set(args) - _CONFIG_FIELDS - _OPTION_FIELDS)
    if unknown:
        raise CascadeError(f"unknown build_app arg '{unknown[0]}'"
                           f"{did_you_mean(unknown[0], sorted(_CONFIG_FIELDS | _OPTION_FIELDS))}")
    cfg = {k: v for k, v in args.items() if k in _CONFIG_FIELDS}
    opts = {k: v for k, v in args.items() if k in _OPTION_FIELDS}
    for k in ("remote_stages", "imports"):
        if opts.get(k) is not None:
            opts[k] = tuple(opts[k])
    return ServeConfig(**cfg), RayOptions(**opts)
