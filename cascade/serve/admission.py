"""Admission control: a bounded FIFO wait queue in front of a fixed number of running requests.

vLLM and SGLang queue a burst instead of refusing it; so does this server. At most `running`
requests hold a slot; up to `queued` more wait for one in arrival order; only a request that finds
the queue full is refused (429 with a `Retry-After` estimated from recent run times). A waiter that
is cancelled (its client went away, its deadline passed) leaves the queue without taking a slot.
Used from one asyncio event loop; a slot held by work in a thread is released through the loop.
"""

from __future__ import annotations

import asyncio
import math
import time

__all__ = ["Admission", "QueueFull"]


class QueueFull(Exception):
    """Every slot is taken and the wait queue is full; `retry_after` is a whole number of
    seconds."""

    def __init__(self, running: int, queued: int, retry_after: int):
        super().__init__(
            f"server busy: {running} requests running and {queued} waiting (the "
            "limits of --max-concurrent and --max-queue); retry shortly"
        )
        self.retry_after = retry_after


class Admission:
    """Slots are taken with `enter` and given back with `leave` rather than a context manager:
    a request that times out stops waiting, but its work keeps the slot until it really ends."""

    def __init__(self, running: int, queued: int):
        if running < 1 or queued < 0:
            raise ValueError(f"need running >= 1 and queued >= 0, got {running}, {queued}")
        self.limit, self.queue_limit = running, queued
        self._sem = asyncio.Semaphore(running)
        self.running = self.waiting = 0
        self._mean_s = 1.0  # moving average of how long a slot is held

    async def enter(self) -> float:
        """Wait for a slot (FIFO); returns the seconds waited. Raises `QueueFull` at once when the
        queue is full; cancelling the caller leaves the queue cleanly."""
        if self._sem.locked() and self.waiting >= self.queue_limit:
            ahead = self.running + self.waiting
            raise QueueFull(
                self.running, self.waiting, max(1, math.ceil(self._mean_s * ahead / self.limit))
            )
        self.waiting += 1
        t0 = time.monotonic()
        try:
            await self._sem.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        return time.monotonic() - t0

    def leave(self, held_s: float) -> None:
        """Give the slot back (call on the event loop's thread); `held_s` feeds Retry-After."""
        self.running -= 1
        self._mean_s = 0.8 * self._mean_s + 0.2 * held_s
        self._sem.release()
