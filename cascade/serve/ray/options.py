"""How the application is laid out on the cluster, and `build_app`'s args (plain YAML values).

Argparse-free and Ray-free: `cascade deploy` and the CLI read it without importing Ray.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from ...errors import CascadeError, did_you_mean
from ...registry import get_stage_class, heavy_stage_types
from ...stage import Serving
from ..config import Flag, ServeConfig

__all__ = [
    "APP_NAME",
    "INGRESS",
    "RayOptions",
    "DeployLayout",
    "app_args",
    "option_args",
    "split_args",
    "serving_of",
]

APP_NAME = "cascade"
INGRESS = "ingress"  # the HTTP ingress deployment's name; the others are stage type names
_INGRESS_SERVING = Serving(num_cpus=0.5)


def serving_of(deployment: str) -> Serving:
    """The serving traits of a deployment: the ingress's, or its stage type's."""
    return _INGRESS_SERVING if deployment == INGRESS else get_stage_class(deployment).serving


class RayOptions(BaseSettings):
    """How the application is laid out on the cluster (the `args` of `build_app` besides the
    `ServeConfig` fields; a flag of `cascade serve --ray`, a `CASCADE_RAY_*` variable, or a
    keyword). num_cpus / num_gpus: Ray resources per replica, by deployment name (unnamed: the
    stage type's declared `serving`, the ingress 0.5 CPU). remote_stages: the stage types that run
    in deployments (None: every registered heavy type). imports: modules each replica imports
    first (stage plugins). retries: how often a call whose replica died is sent again.
    call_timeout_s: longest wait for one stage call. health_check_period_s: Serve's (None: its
    default, 10 s)."""

    model_config = SettingsConfigDict(env_prefix="CASCADE_RAY_", extra="forbid")

    replicas: Annotated[
        int, Flag('replicas of each "model"-pool deployment: the VLM', type=int)
    ] = 1
    stage_replicas: Annotated[
        int, Flag("replicas of each other heavy stage deployment", type=int)
    ] = 1
    model_gpus: Annotated[
        float,
        Flag("GPUs per VLM replica (a fraction shares one GPU)", name="--vlm-gpus", type=float),
    ] = 0.0
    threads: Annotated[
        int | None,
        Flag("torch threads per replica (default: Ray's, from the replica's CPUs)", type=int),
    ] = None
    max_batch_size: Annotated[int, Flag("@serve.batch size of batchable deployments", type=int)] = 4
    batch_wait_timeout_s: Annotated[
        float,
        Flag(
            "@serve.batch wait (ms)",
            name="--batch-wait-ms",
            type=float,
            metavar="MS",
            to_setting=lambda ms: ms / 1000.0,
            shown=lambda s: s * 1000.0,
            env_unit="seconds",
        ),
    ] = 0.01
    num_cpus: dict[str, float] = Field(default_factory=dict)
    num_gpus: dict[str, float] = Field(default_factory=dict)
    remote_stages: tuple[str, ...] | None = None
    imports: tuple[str, ...] = ()
    retries: int = 2
    call_timeout_s: float = 600.0
    health_check_period_s: float | None = None

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


class DeployLayout(BaseSettings):
    """What `cascade deploy` writes into a Serve config beside the application's args: the
    autoscaling of each heavy stage deployment, the Ray resources of each replica, the
    application's name and route, and Serve's HTTP address (a flag of `cascade deploy`, a
    `CASCADE_DEPLOY_*` variable, or a keyword). The VLM replicas' GPUs and batching are
    `RayOptions` (`--vlm-gpus`, `--max-batch-size`)."""

    model_config = SettingsConfigDict(env_prefix="CASCADE_DEPLOY_", extra="forbid")

    min_replicas: Annotated[
        int, Flag("fewest replicas of each heavy stage deployment", type=int)
    ] = Field(1, ge=0)
    max_replicas: Annotated[int, Flag("most replicas of each heavy stage deployment", type=int)] = (
        Field(4, ge=1)
    )
    target_ongoing: Annotated[
        float, Flag("autoscaling target: ongoing requests per replica", type=float)
    ] = Field(2.0, gt=0)
    vlm_cpus: Annotated[float, Flag("Ray CPUs per VLM replica", type=float)] = Field(1.0, ge=0)
    stage_cpus: Annotated[
        float, Flag("Ray CPUs per replica of every other heavy stage", type=float)
    ] = Field(0.5, ge=0)
    ingress_cpus: Annotated[float, Flag("Ray CPUs of the HTTP ingress", type=float)] = Field(
        0.5, ge=0
    )
    name: Annotated[str, Flag("the Serve application's name")] = APP_NAME
    route_prefix: Annotated[str, Flag("the application's route prefix")] = "/"
    host: Annotated[str, Flag("Serve's HTTP bind address")] = "0.0.0.0"
    port: Annotated[int, Flag("Serve's HTTP port", type=int)] = 8000


_CONFIG_FIELDS = set(ServeConfig.model_fields)
_OPTION_FIELDS = set(RayOptions.model_fields)


def app_args(config: ServeConfig, options: RayOptions | None = None) -> dict[str, Any]:
    """`build_app`'s args (plain YAML/JSON values) for a server config and a layout."""
    return config.model_dump(mode="json") | option_args(options or RayOptions())


def option_args(options: RayOptions) -> dict[str, Any]:
    """The `RayOptions` part of `app_args` (what each replica gets)."""
    return options.model_dump(mode="json")


def split_args(args: dict[str, Any] | None) -> tuple[ServeConfig, RayOptions]:
    """The `ServeConfig` and `RayOptions` in `build_app`'s args (unknown keys are errors)."""
    args = dict(args or {})
    unknown = sorted(set(args) - _CONFIG_FIELDS - _OPTION_FIELDS)
    if unknown:
        raise CascadeError(
            f"unknown build_app arg '{unknown[0]}'"
            f"{did_you_mean(unknown[0], sorted(_CONFIG_FIELDS | _OPTION_FIELDS))}"
        )
    return (
        ServeConfig(**{k: v for k, v in args.items() if k in _CONFIG_FIELDS}),
        RayOptions(**{k: v for k, v in args.items() if k in _OPTION_FIELDS}),
    )
