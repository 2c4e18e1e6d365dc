"""The ingress side of the heavy stages: `RemoteStages`, the served pipelines' `StageExecutor`.

- arrays: a large input (an image or a list of them, e.g. a video's frames) is `ray.put` once and
  the same ObjectRef goes to every deployment that reads it (OCR, detector, CLIP), so the frames
  are serialised once, not once per hop; a replica on the same node maps it from the
  shared-memory object store without a copy.
- affinity: a call to a stage type that declares an affinity input carries an id (a hash of that
  input's content and the stage configuration). A call with an id this ingress has sent before (a
  conversation's follow-up) is sent with `multiplexed_model_id` = that id, and Serve's router
  sends it to a replica that has it. A first call is routed by load (power of two choices)
  instead: Serve's multiplex fallback would send a burst of new ids to the one replica with the
  fewest ids until the replicas' id lists propagate (every 0.1 s).
- streaming: a call whose stage streams (`Stage.streams`) to a caller that reads the tokens goes
  to the replica's `run_streaming` through a streaming handle: every token reaches the caller as
  the replica yields it. A silent reader (one that only watches for cancellation) does not
  stream, so the call stays batchable.
- per-request params: a stage this run gives other params (`cascade.stage.run_params`: a
  request's `mm_processor_kwargs`) sends them with the call, and the replica runs it with them.
- faults: a call whose replica dies (`RayActorError`: died, unavailable) is sent again, up to
  `retries` times (unless tokens had already reached the caller); Serve starts a replacement.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ...cache import LRUCache, content_hash, nbytes_of
from ...errors import CascadeError
from ...stage import Stage, run_params_of
from ...streaming import claim_stream, is_silent
from ...trace import mark_cached, record, warn
from .configs import Failure, stage_config, stage_key

__all__ = ["RemoteStages", "affinity_id"]

log = logging.getLogger("cascade.serve.ray")
_PUT_MIN_BYTES = 64 << 10  # inputs at least this large travel as ObjectRefs
_REF_CACHE_BYTES = 512 << 20  # recently put inputs kept for reuse by later hops (at most)
_REF_CACHE_ENTRIES = 64  # ... and at most this many (each counts at least 1/64 of the bytes)
_KEYS = 4096  # stage objects whose configuration key is remembered
_AFFINITY_IDS = 100_000  # affinity ids answered before (routed to their replica)


def _nbytes(value: Any) -> int:
    try:
        return nbytes_of(value)
    except Exception:
        return 0


def affinity_id(key: str, value: Any) -> str:
    """The affinity id of a call: its stage configuration and its affinity input's content."""
    return content_hash([key, value])[:24]


class RemoteStages:
    """The ingress pipelines' `StageExecutor`: heavy stages' runs go to their deployments."""

    def __init__(
        self,
        handles: dict[str, Any],
        remote_types: tuple[str, ...],
        retries: int = 2,
        timeout_s: float = 600.0,
    ):
        self.stage_handles, self.remote_types = dict(handles), set(remote_types) & set(handles)
        self.retries, self.timeout_s = retries, timeout_s
        # id(stage) -> (stage, key); id(value) -> (value, its ObjectRef, bytes): the object is
        # held so its id is not reused while the entry lives.
        self._keys = LRUCache(_KEYS, size_of=lambda _: 1)
        self._refs = LRUCache(
            _REF_CACHE_BYTES,
            size_of=lambda hit: max(hit[2], _REF_CACHE_BYTES // _REF_CACHE_ENTRIES),
        )
        self._answered = LRUCache(_AFFINITY_IDS, size_of=lambda _: 1)
        self._lock = threading.Lock()
        self.replica_stats: dict[
            str, dict[str, dict[str, float]]
        ] = {}  # deployment -> replica -> stats
        self.retried: dict[str, int] = {}
        self.puts = 0

    def handles(self, stage: Stage) -> bool:
        return stage.type_name in self.remote_types

    def key_of(self, stage: Stage) -> str:
        hit = self._keys.get(id(stage))
        if hit is not None and hit[0] is stage:
            return hit[1]
        key = stage_key(stage_config(stage))
        self._keys.put(id(stage), (stage, key))
        return key

    def _payload(self, inputs: dict[str, Any]) -> dict[str, tuple[str, Any]]:
        """Large inputs as ObjectRefs, one `ray.put` per value for all the hops that read it."""
        import ray

        out = {}
        for port, value in inputs.items():
            if (
                isinstance(value, (str, int, float, bool))
                or value is None
                or _nbytes(value) < _PUT_MIN_BYTES
            ):
                out[port] = ("value", value)
                continue
            hit = self._refs.get(id(value))
            if hit is None or hit[0] is not value:
                hit = (value, ray.put(value), _nbytes(value))
                with self._lock:
                    self.puts += 1
                self._refs.put(id(value), hit)
            out[port] = ("ref", hit[1])
        return out

    def run(self, stage: Stage, inputs: dict[str, Any]) -> Any:
        from ray.exceptions import RayActorError

        name = stage.type_name
        handle, key = self.stage_handles[name], self.key_of(stage)
        payload = self._payload(inputs)
        extra: dict[str, Any] = {}
        own = run_params_of(stage)
        if own is not None:  # this request's params (mm_processor_kwargs), not the stage's
            extra["params"] = own.model_dump()
        port = stage.serving.affinity
        if port is not None and port in inputs:
            extra["affinity"] = affinity_id(key, inputs[port])
            if self._answered.get(extra["affinity"]) is not None:  # to the replica that has it
                handle = handle.options(multiplexed_model_id=extra["affinity"])
        on_token = claim_stream(stage.name) if stage.streams() else None
        if is_silent(on_token):  # nobody reads the tokens: keep the call batchable
            on_token = None
        for attempt in range(self.retries + 1):
            streamed = [0]
            try:
                if on_token is None:
                    reply = handle.run.remote(key, payload, **extra).result(
                        timeout_s=self.timeout_s
                    )
                else:
                    reply = self._stream(handle, key, payload, extra, on_token, streamed)
                break
            except RayActorError as e:  # the replica died (or is unreachable): send it again
                if attempt == self.retries or streamed[0]:
                    raise  # tokens already reached the client: a retry would repeat them
                with self._lock:
                    self.retried[name] = self.retried.get(name, 0) + 1
                record(remote_retries=1)
                log.warning("stage %s: replica lost (%s); retrying", stage.name, type(e).__name__)
        with self._lock:
            self.replica_stats.setdefault(name, {})[reply["replica"]] = reply["stats"]
        if "affinity" in extra:
            self._answered.put(extra["affinity"], True)
        if reply["counters"]:
            record(**reply["counters"])
        for w in reply["warnings"]:
            warn(w)
        if reply["status"] == "cached":
            mark_cached()
        out = reply["out"]
        if isinstance(out, Failure):
            raise out.exc
        return out

    @staticmethod
    def _stream(
        handle: Any, key: str, payload: dict, extra: dict, on_token: Any, streamed: list[int]
    ) -> dict[str, Any]:
        """A streaming call: each token goes to `on_token` as the replica yields it (counted in
        `streamed`); the last item is the reply. If `on_token` raises (the client left), the
        remote generation is cancelled."""
        gen = handle.options(stream=True).run_streaming.remote(key, payload, **extra)
        reply = None
        try:
            for item in gen:
                if isinstance(item, dict):
                    reply = item
                else:
                    streamed[0] += 1
                    on_token(item)
        except BaseException:
            gen.cancel()
            raise
        if reply is None:
            raise CascadeError("the replica's stream ended without a reply")
        return reply
