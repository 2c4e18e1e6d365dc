"""Prometheus metrics for GET /metrics, kept and written by `prometheus_client`.

One `CollectorRegistry` per server (tests run several servers in one process): counters and
histograms the server updates as requests end, gauges read when the metrics are scraped, and
custom collectors for figures kept elsewhere (the cache hit ratio, derived from the cache
counters; on Ray, the replicas' own reports, `add_collector`). Thread-safe. Labels are only
server-chosen values (served model ids, status codes, cache names), never raw request strings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["Metrics", "LATENCY_BUCKETS", "CONTENT_TYPE"]

LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
CONTENT_TYPE = CONTENT_TYPE_LATEST  # Prometheus text exposition format

_COUNTERS = {
    "cascade_requests_total": (
        "Chat completion requests by model and HTTP status (499: the client went away).",
        ("model", "status"),
    ),
    "cascade_visual_tokens_total": ("Visual tokens the VLM prefilled.", ("model",)),
    "cascade_baseline_visual_tokens_total": (
        "Visual tokens the full-resolution baseline would have prefilled.",
        ("model",),
    ),
    "cascade_vision_flops_total": ("Cost-model vision-tower FLOPs of the answers.", ("model",)),
    "cascade_prefill_flops_total": ("Cost-model LLM prefill FLOPs of the answers.", ("model",)),
    "cascade_decode_flops_total": ("Cost-model LLM decode FLOPs of the answers.", ("model",)),
    "cascade_baseline_prefill_flops_total": (
        "Cost-model prefill FLOPs of the full-resolution baseline.",
        ("model",),
    ),
    "cascade_prompt_tokens_total": ("OpenAI prompt_tokens (visual + text) served.", ("model",)),
    "cascade_kv_bytes_total": (
        "KV bytes the answers decoded against (after any press).",
        ("model",),
    ),
    "cascade_kv_bytes_unpressed_total": (
        "KV bytes the answers would have held without a KV press.",
        ("model",),
    ),
    "cascade_completion_tokens_total": ("OpenAI completion_tokens served.", ("model",)),
    "cascade_answers_total": ("Answers by producer (vlm or tool).", ("model", "produced_by")),
    "cascade_cache_lookups_total": (
        "Cache lookups by cache (embed, ocr, detect, kv_prefix, ...).",
        ("cache",),
    ),
    "cascade_cache_hits_total": ("Cache hits by cache.", ("cache",)),
}
_HISTOGRAMS = {
    "cascade_request_latency_seconds": "Chat completion latency (seconds) by model, queue "
    "included.",
    "cascade_queue_wait_seconds": "Seconds from a request's arrival until its pipeline started "
    "(waiting for a slot, then for the pipeline) by model.",
}


class _CacheHitRatio(Collector):
    """Hits / lookups per cache since start, read from the two cache counters when scraped."""

    def __init__(self, hits: Counter, lookups: Counter):
        self._hits, self._lookups = hits, lookups

    @staticmethod
    def _totals(counter: Counter) -> dict[str, float]:
        return {
            s.labels["cache"]: s.value
            for m in counter.collect()
            for s in m.samples
            if s.name.endswith("_total")
        }

    def collect(self) -> Iterable[Metric]:
        ratio = GaugeMetricFamily(
            "cascade_cache_hit_ratio", "Hits / lookups per cache since start.", labels=["cache"]
        )
        hits = self._totals(self._hits)
        for cache, n in sorted(self._totals(self._lookups).items()):
            if n:
                ratio.add_metric([cache], hits.get(cache, 0.0) / n)
        yield ratio


class Metrics:
    """The server's metrics: `inc` a counter, `observe` a histogram, `gauge` a value read at
    scrape time, `render` the exposition text."""

    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS):
        self.registry = CollectorRegistry()
        self._counters = {
            name: Counter(name, help_, labels, registry=self.registry)
            for name, (help_, labels) in _COUNTERS.items()
        }
        self._histograms = {
            name: Histogram(
                name, help_, ("model",), buckets=tuple(sorted(buckets)), registry=self.registry
            )
            for name, help_ in _HISTOGRAMS.items()
        }
        # A gauge, not a counter: an answer that spent more visual tokens than its baseline (a
        # page read in native-size crops) lowers it.
        self._saved = Gauge(
            "cascade_visual_tokens_saved",
            "Baseline visual tokens minus visual "
            "tokens used, summed over the answers that have a baseline.",
            ("model",),
            registry=self.registry,
        )
        self._in_flight = Gauge(
            "cascade_requests_in_flight",
            "Chat requests being processed (queued, running or being answered).",
            registry=self.registry,
        )
        self.registry.register(
            _CacheHitRatio(
                self._counters["cascade_cache_hits_total"],
                self._counters["cascade_cache_lookups_total"],
            )
        )

    def inc(self, name: str, labels: tuple[str, ...], value: float = 1.0) -> None:
        self._counters[name].labels(*labels).inc(value)

    def add_saved(self, model: str, tokens: float) -> None:
        """Add one answer's baseline minus used visual tokens (negative when it used more)."""
        self._saved.labels(model).inc(tokens)

    def observe(self, name: str, labels: tuple[str, ...], seconds: float) -> None:
        self._histograms[name].labels(*labels).observe(seconds)

    def gauge(self, name: str, help_: str, read: Callable[[], float]) -> None:
        """A gauge whose value is `read()` when the metrics are scraped."""
        Gauge(name, help_, registry=self.registry).set_function(read)

    def add_collector(self, collector: Collector) -> None:
        """Figures kept elsewhere (e.g. Ray replicas' reports), collected at scrape time."""
        self.registry.register(collector)

    def add_in_flight(self, delta: int) -> None:
        self._in_flight.inc(delta)

    def value(self, name: str, labels: tuple[str, ...]) -> float:
        """A counter's current value (0 when that label set was never counted)."""
        names = _COUNTERS[name][1]
        got = self.registry.get_sample_value(name, dict(zip(names, labels, strict=True)))
        return 0.0 if got is None else got

    def render(self) -> str:
        return generate_latest(self.registry).decode("utf-8")
