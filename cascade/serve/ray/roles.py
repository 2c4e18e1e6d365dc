"""Encode, prefill and decode as Ray Serve deployments of one declared model
(`models.<name>.serve.disaggregate: pd | epd`; `cascade.vlm.disagg` is the state they exchange).

- `RoleReplica` is a prefill (or encode) deployment's replica: it loads the declared model and
  answers `prefill` (the images' prefix into its KV block cache, then the blocks the caller
  lacks) or `embed` (the vision tower's output).
- The decode side is the model's VLM stage deployment (`StageReplica`): `install_roles` puts a
  `RemoteRoles` in front of its loaded model. For each request it asks the encode deployment for
  the images' embeddings (epd), works out which prefix blocks its own cache lacks, has the prefill
  deployment compute and ship only those (through Ray's object store), stores them and answers
  locally: a full prefix-cache hit, so only the question's tokens are prefilled here before the
  decode joins this replica's continuous batch.

Serve routes each request to the least-loaded decode replica (power of two choices on queue
length); that replica then pulls from the prefill deployment, which Serve balances the same way.
A decode replica never holds more than `max_num_seqs` sequences in its batch: the others wait in
its continuous batcher's queue, they do not fail. Sessions stay colocated on the decode replica.
What moves is measured per call and recorded as the VLM stage's trace counters: `kv_shipped_bytes`,
`prefill_call_overhead_s` (the prefill call's round trip less the time inside it: the transfer
both ways and Serve's routing and queueing), `embeds_bytes`, `encode_s` (the encode call's round
trip).
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ...cache import content_hash
from ...stage import Stage
from ...trace import record, warn
from ...vlm.disagg import Shipment, lacking, prefill, prefix_keys, receive
from ...vlm.options import ModelSpec, ServeRoles
from .configs import build_stage_model, prepare_process
from .options import RayOptions

if TYPE_CHECKING:
    from ...vlm.transformers_backend import TransformersBackend

__all__ = [
    "RoleReplica",
    "RemoteRoles",
    "model_key",
    "disaggregated_models",
    "install_roles",
]


def model_key(spec: dict[str, Any]) -> str:
    """A declared model's key on both sides of the application (its spec as declared)."""
    return content_hash(spec, key="served_model")[:16]


def disaggregated_models(
    found: dict[str, dict[str, dict[str, Any]]],
) -> dict[str, tuple[str, dict[str, Any], ServeRoles]]:
    """`model_key` -> (model name, spec, roles) of every disaggregated model the served stages
    declare (`found`: stage type -> key -> stage configuration)."""
    out: dict[str, tuple[str, dict[str, Any], ServeRoles]] = {}
    for configs in found.values():
        for cfg in configs.values():
            for name, raw in cfg["models"].items():
                roles = getattr(ModelSpec.model_validate(raw), "serve", None)
                if isinstance(roles, ServeRoles) and roles.roles:
                    out.setdefault(model_key(raw), (name, raw, roles))
    return out


class RoleReplica:
    """One replica of a model's encode or prefill deployment."""

    backend: TransformersBackend
    calls: int

    def __init__(
        self, role: str, spec: dict[str, Any], options: dict[str, Any] | None = None, tiny=False
    ):
        prepare_process(RayOptions(**(options or {})))
        from ...vlm.transformers_backend import TransformersBackend  # torch: in the replica only

        self.role = role
        backend = build_stage_model(spec, tiny).load().backend
        assert isinstance(backend, TransformersBackend)  # `serve` is a transformers model's field
        self.backend = backend
        self.calls = 0

    def embed(self, images: Any) -> list[Any]:
        """The vision tower's output for each image (`ImageEmbeds`)."""
        self.calls += 1
        return self.backend.image_embeds(images)

    def prefill(self, images: Any, question: str, lacks: list[str], **kw: Any) -> Shipment:
        """The request's prefix computed (or found) in this replica's block cache; the blocks
        `lacks` names, shipped."""
        self.calls += 1
        return prefill(self.backend, images, question, lacks=set(lacks), **kw)

    def info(self) -> dict[str, Any]:
        return {"role": self.role, "calls": self.calls}


class RemoteRoles:
    """The decode side's backend: the local model, fed by the encode and prefill deployments.
    Every other attribute is the local backend's."""

    def __init__(self, local: Any, prefill_handle: Any, encode_handle: Any = None):
        self.local, self.prefill_handle, self.encode_handle = local, prefill_handle, encode_handle

    def __getattr__(self, name: str) -> Any:
        return getattr(self.local, name)

    def _fetch(self, images: Any, question: str, **kw: Any) -> Any:
        """Embeddings from the encode role (epd), the prefix blocks this replica lacks from the
        prefill role; returns what the local model is then given in the images' place. A role
        whose replica died (Serve replaces it) costs this request its disaggregation, not its
        answer: the decode replica holds the whole model and computes what did not come."""
        from ray.exceptions import RayActorError

        try:
            if self.encode_handle is not None:
                t = time.perf_counter()
                images = self.encode_handle.embed.remote(images).result()
                record(
                    encode_s=time.perf_counter() - t,
                    embeds_bytes=sum(e.embeds.numel() * e.embeds.element_size() for e in images),
                )
            need = lacking(self.local, prefix_keys(self.local, images, question, **kw))
            if need:
                t = time.perf_counter()
                shipment = self.prefill_handle.prefill.remote(images, question, need, **kw)
                shipment = shipment.result()
                waited = time.perf_counter() - t
                received = receive(self.local, shipment)
                record(
                    kv_shipped_bytes=shipment.nbytes,
                    prefill_call_overhead_s=max(0.0, waited - shipment.wall_s) + received,
                    prefill_remote_s=shipment.vision_s + shipment.prefill_s,
                )
            record(kv_blocks_lacked=len(need))
        except RayActorError as e:
            warn(
                f"a {self.local.model_id} encode/prefill replica failed ({type(e).__name__}); "
                "this request was encoded and prefilled on its decode replica"
            )
            record(role_fallbacks=1)
        return images

    def generate(self, images: Any, question: str, **kw: Any) -> Any:
        prefix_kw = {k: kw[k] for k in ("reduction", "system_prompt", "history") if k in kw}
        return self.local.generate(self._fetch(images, question, **prefix_kw), question, **kw)

    def generate_batch(self, requests: Sequence[tuple[Any, str]], **kw: Any) -> list[Any]:
        """Each request on its own thread: their decodes meet in the continuous batch (the local
        backend's `generate_batch` would bypass the prefix cache the blocks arrive in)."""
        sampling = {k: kw[k] for k in ("max_new_tokens", "reduction", "system_prompt", "sampling")}
        with ThreadPoolExecutor(max(1, len(requests))) as pool:
            futures = [  # each in a copy of this context: the stage's trace record
                pool.submit(
                    contextvars.copy_context().run,
                    functools.partial(self.generate, images, question, **sampling),
                )
                for images, question in requests
            ]
            return [f.result() for f in futures]


def install_roles(
    configs: dict[str, dict[str, Any]], stages: dict[str, Stage], roles: dict[str, dict[str, Any]]
) -> None:
    """Put `RemoteRoles` in front of the loaded models of `stages` (built from `configs`, by
    key) that `roles` names (`model_key` -> role -> deployment handle). Models are shared per
    process: each is wrapped once."""
    for key, cfg in configs.items():
        for name, raw in cfg["models"].items():
            handles = roles.get(model_key(raw))
            if handles is None:
                continue
            vlm = stages[key].models[name].vlm
            if not isinstance(vlm.backend, RemoteRoles):
                vlm.backend = RemoteRoles(vlm.backend, handles["prefill"], handles.get("encode"))
