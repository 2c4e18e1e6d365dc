"""What a replica needs to rebuild a stage of the served pipelines, and the key both sides use.

A configuration is the stage's type, name, params and the declared models it names; stages of the
same type, params and models are one configuration (the name aside): one set-up copy per replica.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from ...cache import content_hash
from ...models import Models, ModelSpec, model_params
from ...registry import get_stage_class
from ...stage import Stage
from .options import RayOptions

__all__ = [
    "stage_config",
    "stage_key",
    "build_stage",
    "build_stage_model",
    "prepare_process",
    "Failure",
]


def stage_config(stage_obj: Stage) -> dict[str, Any]:
    """What a replica needs to rebuild `stage_obj`: type, name, params (its own: a run's params
    travel with each call), the models it names."""
    own = stage_obj.own_params
    names = [getattr(own, p) for p in model_params(type(stage_obj).Params)]
    models = {n: stage_obj.models[n].spec.model_dump() for n in names if n is not None}
    return {
        "type": stage_obj.type_name,
        "name": stage_obj.name,
        "params": own.model_dump(),
        "models": models,
    }


def stage_key(config: dict[str, Any]) -> str:
    """Stages of the same type, params and models are one configuration (the name aside)."""
    return content_hash({k: config[k] for k in ("type", "params", "models")})[:16]


def build_stage_model(spec: dict[str, Any], tiny: bool) -> ModelSpec:
    """A declared model's spec, in this process (a replica's): with `tiny`, a transformers model
    whose folder is not on this machine is the same tiny random-weight model built here."""
    spec = dict(spec)
    if (
        tiny
        and spec.get("backend", "transformers") == "transformers"
        and not Path(spec["id"]).exists()
    ):
        from ...vlm.tiny import build_tiny_vlm  # another machine: build the same tiny model here

        spec["id"] = str(build_tiny_vlm(size="test"))
    return ModelSpec.model_validate(spec)


def build_stage(config: dict[str, Any], tiny: bool) -> Stage:
    """The stage of `config`, in this process (a replica's)."""
    models = {name: build_stage_model(spec, tiny) for name, spec in config["models"].items()}
    cls = get_stage_class(config["type"])
    return cls(config["params"], name=config["name"], models=Models(models))


def prepare_process(options: RayOptions) -> None:
    """Per-replica process setup: stage plugins to import, torch threads."""
    for mod in options.imports:
        importlib.import_module(mod)
    if options.threads:
        import torch

        torch.set_num_threads(int(options.threads))


class Failure:
    """A stage's exception, carried back to the ingress (re-raised there as the stage's own)."""

    def __init__(self, exc: BaseException):
        try:
            import pickle

            pickle.loads(pickle.dumps(exc))
            self.exc = exc
        except Exception:
            self.exc = RuntimeError(f"{type(exc).__name__}: {exc}")
