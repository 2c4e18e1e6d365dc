"""Stopping a server on SIGTERM or SIGINT: drain what is in flight (bounded), then exit 0.

In process, `DrainingServer` is uvicorn's server: on the first signal it stops accepting
connections and waits up to --drain-timeout seconds for the requests in flight to be answered
(a second SIGINT stops at once). uvicorn re-raises the signal once it has shut down, which would
end the process by that signal; a server asked to stop has stopped as asked, so it returns and
`cascade serve` exits 0.

On Ray, `wait_for_stop` blocks the driver until a signal comes, and `drain` then polls the
ingress's /health until nothing is running or queued (or --drain-timeout passes); the caller
shuts Serve and Ray down in the normal flow, not inside a signal handler.
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

__all__ = ["DrainingServer", "wait_for_stop", "drain", "STOP_SIGNALS"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class DrainingServer(uvicorn.Server):
    """uvicorn's server, stopped by SIGTERM or SIGINT after draining (`uvicorn.Config`'s
    `timeout_graceful_shutdown` bounds the drain), without re-raising the signal after."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()  # stopped as asked: no signal to re-raise


def wait_for_stop() -> int:
    """Block until SIGTERM or SIGINT arrives (main thread only); returns the signal."""
    got: list[int] = []
    event = threading.Event()

    def stop(sig: int, frame: Any) -> None:
        got.append(sig)
        event.set()

    before = {s: signal.signal(s, stop) for s in STOP_SIGNALS}
    try:
        while not event.wait(0.5):  # a timed wait: signal handlers run between waits
            pass
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
    return got[0]


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
