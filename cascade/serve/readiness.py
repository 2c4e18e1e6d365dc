"""Readiness: is every served pipeline able to answer now, and if not, what is it waiting for.

`/health` answers 200 only when nothing is pending, else 503 with what is (a load balancer keeps
traffic away meanwhile); `/health/live` answers 200 as long as the process serves HTTP.

Pending things come from two places. Models: the server loads every served pipeline's models in a
background thread at start (`load`), so the first request does not pay for them and readiness
means something; a pipeline is "loading", then "ready" or "failed: <why>" (a failed one keeps the
server not ready: it cannot answer). Probes: callables a deployment adds for what it depends on
(on Ray Serve, a deployment with no running replica), asked on every /health.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["Readiness", "Probe"]

log = logging.getLogger("cascade.serve")

# A probe: () -> (fields to add to the /health body, what is not ready yet in words).
Probe = Callable[[], tuple[dict[str, Any], list[str]]]


class Readiness:
    """Load states of the served pipelines and the probes of what else they depend on."""

    def __init__(self, model_ids: Iterable[str], *, loaded: bool = False):
        self.states: dict[str, str] = {m: "ready" if loaded else "loading" for m in model_ids}
        self.probes: list[Probe] = []
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def load(
        self, setups: dict[str, Callable[[], None]], describe: Callable[[BaseException], str] = str
    ) -> None:
        """Run each model's `setup` in one background thread (once; later calls do nothing).
        `describe` turns a failure into the words /health shows (no server paths)."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(
                target=self._load, args=(setups, describe), name="cascade-load-models", daemon=True
            )
            self._thread.start()

    def _load(
        self, setups: dict[str, Callable[[], None]], describe: Callable[[BaseException], str]
    ) -> None:
        for model, setup in setups.items():
            if self.states.get(model) != "loading":
                continue
            try:
                setup()
                self.states[model] = "ready"
            except Exception as e:  # noqa: BLE001  reported by /health, logged with its traceback
                log.exception("loading %s failed", model)
                self.states[model] = f"failed: {describe(e)}"

    def check(self) -> tuple[bool, dict[str, Any]]:
        """(ready, fields for the /health body: status, waiting_for, models, probe fields).
        Probes may block (Ray's status call): call this off the event loop."""
        waiting = [
            f"{m}: {'models loading' if s == 'loading' else s}"
            for m, s in self.states.items()
            if s != "ready"
        ]
        extra: dict[str, Any] = {}
        for probe in self.probes:
            try:
                fields, pending = probe()
            except Exception as e:  # noqa: BLE001  e.g. Ray's controller unreachable: not ready
                log.warning("readiness probe failed: %s", e)
                fields, pending = {}, [f"status unavailable ({type(e).__name__})"]
            extra.update(fields)
            waiting += pending
        failed = any(s.startswith("failed") for s in self.states.values())
        status = "ok" if not waiting else "failed" if failed else "starting"
        return not waiting, {
            "status": status,
            "waiting_for": waiting,
            "models": dict(self.states),
            **extra,
        }
