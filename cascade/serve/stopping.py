"""Stopping a server on SIGTERM or SIGINT: drain what is in flight (bounded), then exit 0.

In process, `DrainingServer` is uvicorn's server: on the first signal it stops accepting
connections and waits up to --drain-timeout seconds for the requests in flight to be answered
(a second SIGINT stops at once). uvicorn re-raises the signal once it has shut down, which would
end the process by that signal; a server asked to stop has stopped as asked, so it returns and
`cascade serve` exits 0.

On Ray, `StopSignals` catches the signals from before the cluster starts: one that comes while
Serve is still starting (its replicas can answer before `serve.run` returns) is kept, not
raised as KeyboardInterrupt mid-start, and a second SIGINT stops at once. `StopSignals.wait`
blocks the driver until a signal has come, and `drain` then polls the ingress's /health until
nothing is running or queued (or --drain-timeout passes); the caller shuts Serve and Ray down in
the normal flow, not inside a signal handler.
"""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.error
import urllib.request
from types import FrameType
from typing import Any

import uvicorn

__all__ = ["DrainingServer", "StopSignals", "drain", "STOP_SIGNALS"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class DrainingServer(uvicorn.Server):
    """uvicorn's server, stopped by SIGTERM or SIGINT after draining (`uvicorn.Config`'s
    `timeout_graceful_shutdown` bounds the drain), without re-raising the signal after."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()  # stopped as asked: no signal to re-raise


class StopSignals:
    """SIGTERM and SIGINT, caught while the context is open (main thread only): the first asks to
    stop (`wait` returns it), a second SIGINT raises KeyboardInterrupt (stop at once)."""

    def __init__(self) -> None:
        self.got: list[int] = []
        self._event = threading.Event()
        self._before: dict[int, Any] = {}

    def _catch(self, sig: int, frame: Any) -> None:
        if self.got and sig == signal.SIGINT:
            raise KeyboardInterrupt
        self.got.append(sig)
        self._event.set()

    def __enter__(self) -> StopSignals:
        self._before = {s: signal.signal(s, self._catch) for s in STOP_SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._before.items():
            signal.signal(s, handler)

    def wait(self) -> int:
        """Block until a stop signal has come (at once if one came already); returns it."""
        while not self._event.wait(0.5):  # a timed wait: signal handlers run between waits
            pass
        return self.got[0]


def drain(url: str, timeout: float) -> bool:
    """Wait until the server at `url` has no request running or queued (its /health's `busy`
    and `queued`), at most `timeout` seconds; True when it drained."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as e:  # 503 while something loads: still a body
            body = json.loads(e.read() or b"{}")
        except (OSError, ValueError):
            return False  # nothing answers: nothing left to drain there
        if not body.get("busy") and not body.get("queued"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
