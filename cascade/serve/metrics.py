"""Prometheus metrics in the text exposition format (0.0.4), written by hand: it is small, and
`prometheus_client` is not a dependency. Thread-safe; labels are only server-chosen values (known
model ids, status codes, cache names), never raw request strings.
"""
from __future__ import annotations

import threading
from collections import defaultdict
from typing import Callable

__all__ = ["Metrics", "LATENCY_BUCKETS"]

LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


def _labels(names: tuple[str, ...], values: tuple[str, ...], extra: str = "") -> str:
    pairs = [f'{n}="{_escape(v)}"' for n, v in zip(names, values)]
    if extra:
        pairs.append(extra)
    return "{" + ",".join(pairs) + "}" if pairs else ""


def _escape(v: str) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fmt(x: float) -> str:
    if x == float("inf"):
        return "+Inf"
    return repr(float(x)) if not float(x).is_integer() else str(int(x))


class Metrics:
    """Counters, gauges and two histograms (request latency, queue wait) by model."""

    _COUNTERS = {
        "cascade_requests_total": ("Chat completion requests by model and HTTP status (499: the client went away).", ("model", "status")),
        "cascade_visual_tokens_total": ("Visual tokens the VLM prefilled.", ("model",)),
        "cascade_baseline_visual_tokens_total": ("Visual tokens the full-resolution baseline would have prefilled.", ("model",)),
        "cascade_visual_tokens_saved_total": ("Baseline visual tokens minus visual tokens used.", ("model",)),
        "cascade_vision_flops_total": ("Cost-model vision-tower FLOPs of the answers.", ("model",)),
        "cascade_prefill_flops_total": ("Cost-model LLM prefill FLOPs of the answers.", ("model",)),
        "cascade_decode_flops_total": ("Cost-model LLM decode FLOPs of the answers.", ("model",)),
        "cascade_baseline_prefill_flops_total": ("Cost-model prefill FLOPs of the full-resolution baseline.", ("model",)),
        "cascade_prompt_tokens_total": ("OpenAI prompt_tokens (visual + text) served.", ("model",)),
        "cascade_completion_tokens_total": ("OpenAI completion_tokens served.", ("model",)),
        "cascade_answers_total": ("Answers by producer (vlm or tool).", ("model", "produced_by")),
        "cascade_cache_lookups_total": ("Cache lookups by cache (embed, ocr, detect, kv_prefix, ...).", ("cache",)),
        "cascade_cache_hits_total": ("Cache hits by cache.", ("cache",)),
    }
    _HISTOGRAMS = {
        "cascade_request_latency_seconds": "Chat completion latency (seconds) by model, queue included.",
        "cascade_queue_wait_seconds": "Seconds from a request's arrival until its pipeline started "
                                      "(waiting for a slot, then for the pipeline) by model.",
    }

    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS):
        self._lock = threading.Lock()
        self._counters: dict[str, dict[tuple[str, ...], float]] = {k: defaultdict(float) for k in self._COUNTERS}
        self.buckets = tuple(sorted(buckets))
        # name -> model -> bucket counts + [sum, count]
        self._hist: dict[str, dict[tuple[str, ...], list[float]]] = {k: {} for k in self._HISTOGRAMS}
        self._gauges: dict[str, tuple[str, Callable[[], float]]] = {}
        self.in_flight = 0

    def inc(self, name: str, labels: tuple[str, ...], value: float = 1.0) -> None:
        with self._lock:
            self._counters[name][labels] += value

    def observe(self, name: str, labels: tuple[str, ...], seconds: float) -> None:
        with self._lock:
            h = self._hist[name].setdefault(labels, [0.0] * (len(self.buckets) + 2))
            for i, b in enumerate(self.buckets):
                if seconds <= b:
                    h[i] += 1
            h[-2] += seconds
            h[-1] += 1

    def gauge(self, name: str, help_: str, read: Callable[[], float]) -> None:
        """A gauge whose value is read when the metrics are rendered."""
        self._gauges[name] = (help_, read)

    def add_in_flight(self, delta: int) -> None:
        with self._lock:
            self.in_flight += delta

    def value(self, name: str, labels: tuple[str, ...]) -> float:
        with self._lock:
            return self._counters[name].get(labels, 0.0)

    def render(self) -> str:
        out: list[str] = []
        with self._lock:
            for name, (help_, names) in self._COUNTERS.items():
                out += [f"# HELP {name} {help_}", f"# TYPE {name} counter"]
                for labels, v in sorted(self._counters[name].items()):
                    out.append(f"{name}{_labels(names, labels)} {_fmt(v)}")
            out += ["# HELP cascade_cache_hit_ratio Hits / lookups per cache since start.",
                    "# TYPE cascade_cache_hit_ratio gauge"]
            lookups = self._counters["cascade_cache_lookups_total"]
            hits = self._counters["cascade_cache_hits_total"]
            for labels, n in sorted(lookups.items()):
                if n:
                    out.append(f"cascade_cache_hit_ratio{_labels(('cache',), labels)} "
                               f"{_fmt(hits.get(labels, 0.0) / n)}")
            gauges = {"cascade_requests_in_flight": ("Chat requests being processed (queued, "
                                                     "running or being answered).", lambda: self.in_flight),
                      **self._gauges}
            for name, (help_, read) in gauges.items():
                out += [f"# HELP {name} {help_}", f"# TYPE {name} gauge", f"{name} {_fmt(read())}"]
            for name, help_ in self._HISTOGRAMS.items():
                out += [f"# HELP {name} {help_}", f"# TYPE {name} histogram"]
                for labels, h in sorted(self._hist[name].items()):
                    for b, c in [*zip(self.buckets, h), (float("inf"), h[-1])]:
                        le = 'le="%s"' % _fmt(b)
                        out.append(f"{name}_bucket{_labels(('model',), labels, le)} {_fmt(c)}")
                    out.append(f"{name}_sum{_labels(('model',), labels)} {_fmt(h[-2])}")
                    out.append(f"{name}_count{_labels(('model',), labels)} {_fmt(h[-1])}")
        return "\n".join(out) + "\n"
