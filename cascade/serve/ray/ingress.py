"""The HTTP ingress: the usual app (`cascade.serve.app.create_app`) over an `Engine` whose heavy
stages run in their deployments.

Same OpenAI-compatible API, request checks, admission queue, limits and errors as in process. The
engine runs its pipelines through `RemoteStages` without a per-pipeline run lock (the ingress runs
up to --max-concurrent requests of a pipeline at once; the replicas' `max_ongoing_requests` and
`@serve.batch` take it from there). `/health` adds `"replicas"` (running replicas per deployment,
from `serve.status()`) and answers 503 while a deployment the pipelines use has no running replica
(a readiness probe); `/metrics` adds the deployments' figures through a `prometheus_client`
collector (`ReplicaMetrics`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from ray import serve

from ...errors import CascadeError
from ..app import create_app
from ..engine import Engine
from .configs import prepare_process
from .executor import RemoteStages
from .options import split_args

__all__ = ["Ingress", "ReplicaMetrics"]

log = logging.getLogger("cascade.serve.ray")


class Ingress:
    """The HTTP ingress deployment: `create_app` over an `Engine` whose heavy stages run
    remotely."""

    def __init__(self, args: dict[str, Any], handles: dict[str, Any], roles: Sequence[str] = ()):
        config, options = split_args(args)
        prepare_process(options)
        config = config.model_copy(update={"workers": max(config.workers, config.max_concurrent)})
        self.options, self.roles = options, list(roles)  # roles: encode/prefill deployments
        self.remote = RemoteStages(
            handles, options.remote_types(), options.retries, options.call_timeout_s
        )
        # The heavy stages load in replicas; their runs go there; no run lock in the ingress.
        self.engine = Engine(config, load_models=False, executor=self.remote)
        self._status: tuple[float, dict[str, int]] = (0.0, {})
        self.engine.readiness.probes.append(self.replica_probe)
        self.engine.metrics.add_collector(ReplicaMetrics(self))
        self._warm()

    def _warm(self) -> None:
        """Read the declared models' families (config and processor, no weights) now: the light
        stages price images with them, and concurrent first imports of transformers race."""
        for served in self.engine.models.values():
            for declared in served.qa.pipeline.models.values():
                try:
                    _ = declared.family  # reading it loads it
                except CascadeError as e:  # the stage that needs it reports it per request
                    log.warning("model '%s': %s", declared.name, e)

    def replicas(self) -> dict[str, int]:
        """Running replicas per deployment of this application (`serve.status()`, 0.5 s cache)."""
        t, counts = self._status
        if time.monotonic() - t < 0.5:
            return counts
        app = serve.get_replica_context().app_name
        status = serve.status().applications.get(app)
        counts = (
            {}
            if status is None
            else {
                # keyed by ReplicaState, a str enum
                name: sum(n for state, n in d.replica_states.items() if state == "RUNNING")
                for name, d in status.deployments.items()
            }
        )
        self._status = (time.monotonic(), counts)
        return counts

    def replica_probe(self) -> tuple[dict[str, Any], list[str]]:
        """Readiness: every deployment the served pipelines call (their stages' and their models'
        encode / prefill roles) has a running replica."""
        counts = self.replicas()
        waiting = [
            f"deployment '{d}': no running replica"
            for d in sorted({*self.remote.remote_types, *self.roles})
            if counts.get(d, 0) < 1
        ]
        return {"replicas": counts}, waiting

    def __serve_build_asgi_app__(self):
        return create_app(self.engine.config, engine=self.engine)


class ReplicaMetrics(Collector):
    """The deployments' figures, read when /metrics is scraped: running replicas, the replicas'
    counters summed (each replica's latest cumulative report; a replaced replica's last report
    stays in the sum), calls per replica, retries after a replica died, object-store puts."""

    def __init__(self, ingress: Ingress):
        self.ingress = ingress

    def collect(self) -> Iterator[Metric]:
        replicas = GaugeMetricFamily(
            "cascade_deployment_replicas",
            "Running replicas per Ray Serve deployment.",
            labels=["deployment"],
        )
        for d, n in sorted(self.ingress.replicas().items()):
            replicas.add_metric([d], n)
        yield replicas
        remote = self.ingress.remote
        with remote._lock:
            stats = {d: dict(r) for d, r in remote.replica_stats.items()}
            retried, puts = dict(remote.retried), remote.puts
        for k in sorted({k for reps in stats.values() for s in reps.values() for k in s}):
            family = CounterMetricFamily(
                f"cascade_deployment_{k}",
                f"Replicas' {k.replace('_', ' ')} (summed over replicas).",
                labels=["deployment"],
            )
            for d, reps in sorted(stats.items()):
                family.add_metric([d], sum(s.get(k, 0) for s in reps.values()))
            yield family
        calls = CounterMetricFamily(
            "cascade_replica_calls",
            "Stage calls each replica answered (a replaced replica keeps its last count).",
            labels=["deployment", "replica"],
        )
        for d, reps in sorted(stats.items()):
            for rid, s in sorted(reps.items()):
                calls.add_metric([d, rid], s.get("calls", 0))
        yield calls
        retries = CounterMetricFamily(
            "cascade_remote_retries",
            "Stage calls sent again after their replica died.",
            labels=["deployment"],
        )
        for d, n in sorted(retried.items()):
            retries.add_metric([d], n)
        yield retries
        yield CounterMetricFamily(
            "cascade_object_puts",
            "Inputs put in the Ray object store (one per value, whatever the hops).",
            value=puts,
        )
