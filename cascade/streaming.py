"""Stream a run's answer tokens to its caller as the VLM generates them.

The caller (the server, `QA.ask(on_token=...)`) opens `answer_stream(on_token)` around
`Pipeline.run`. The runner copies the caller's context into the threads stages run in, so a VLM
stage finds the stream with `claim_stream(stage_name)` without any signature carrying it.

One VLM call per run streams: the first stage that claims it. A stage whose answer is a draft
(video_qa_selfcheck's thumbnail pass, whose confidence decides whether to look closer) has
`stream: false` and never claims, so the tokens the caller sees are the final answer's. A tool
answer claims nothing: the caller sends its text at once. `streamed_by` names the stage that
claimed, so a caller whose final answer is not what streamed can say which stage to fix.

`on_token` runs in the thread that decodes (the model's continuous-batch loop,
`cascade.vlm.batcher`; for a session or FastV, the stage's), once per generated token, so it must
be quick and thread-safe; an exception it raises (e.g. the server's "client went away") stops
that request's generation and fails its run.

`TokenChannel` is the one bridge from that thread to whoever reads the tokens: a blocking
iterator (`VLM.stream`) or an event loop (the server's SSE response, a Ray replica's streaming
method). anyio's memory object streams do not fit: they are not thread-safe, and sending from a
plain worker thread goes through `anyio.from_thread`, which blocks the decode loop on the event
loop for every token and needs a thread anyio started.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["AnswerStream", "answer_stream", "claim_stream", "silent", "is_silent", "TokenChannel"]

OnToken = Callable[[Any], Any]  # called with a `cascade.vlm.decode.TokenEvent`


class AnswerStream:
    """Where one run's answer tokens go; claimed by at most one stage."""

    def __init__(self, on_token: OnToken):
        self.on_token = on_token
        self.streamed_by: str | None = None
        self._lock = threading.Lock()  # concurrent branches may both try to claim

    def claim(self, stage: str) -> OnToken | None:
        """`on_token` for the first stage that asks; None for every later one."""
        with self._lock:
            if self.streamed_by is not None:
                return None
            self.streamed_by = stage
            return self.on_token


_CURRENT: contextvars.ContextVar[AnswerStream | None] = contextvars.ContextVar(
    "cascade_answer_stream", default=None
)


@contextmanager
def answer_stream(on_token: OnToken) -> Iterator[AnswerStream]:
    """Runs started inside the block stream their answer's tokens to `on_token`."""
    stream = AnswerStream(on_token)
    token = _CURRENT.set(stream)
    try:
        yield stream
    finally:
        _CURRENT.reset(token)


def claim_stream(stage: str) -> OnToken | None:
    """The current run's token callback if this stage is the one to stream, else None."""
    stream = _CURRENT.get()
    return stream.claim(stage) if stream is not None else None


def silent(on_token: OnToken) -> OnToken:
    """Mark a callback that only watches the tokens (to stop a cancelled run) and shows them to
    nobody: a stage that would pay to stream (a remote VLM: no batching) need not."""
    on_token.silent = True  # type: ignore[attr-defined]
    return on_token


def is_silent(on_token: OnToken | None) -> bool:
    return bool(getattr(on_token, "silent", False))


class TokenChannel:
    """Tokens from one producer thread to one reader, in order, then the end.

    `put` (the `on_token` callback) and `close` never block and may be called from any thread;
    a token put after `close` is dropped (its reader has gone).
    Read with `for event in channel` (blocking) or `async for event in channel` (on an event loop,
    which `put` wakes through `call_soon_threadsafe`). Iteration ends once the channel is closed
    and every token has been read; `close(error)` re-raises `error` to the reader at the end."""

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._error: BaseException | None = None
        self._wake: Callable[[], None] | None = None  # an async reader's, while it waits

    def put(self, event: Any) -> None:
        with self._cond:
            if self._closed:
                return
            self._items.append(event)
            self._notify()

    def close(self, error: BaseException | None = None) -> None:
        with self._cond:
            if not self._closed:
                self._closed, self._error = True, error
                self._notify()

    def _notify(self) -> None:  # holding the condition
        self._cond.notify_all()
        if self._wake is not None:
            self._wake()

    def _take(self) -> tuple[bool, Any]:  # holding the condition: (True, token) or (False, None)
        if self._items:
            return True, self._items.popleft()
        if self._closed and self._error is not None:
            error, self._error = self._error, None
            raise error
        return False, None

    def __iter__(self) -> Iterator[Any]:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._items or self._closed)
                got, event = self._take()
            if not got:
                return
            yield event

    async def __aiter__(self) -> AsyncIterator[Any]:
        loop, ready = asyncio.get_running_loop(), asyncio.Event()

        def wake() -> None:
            loop.call_soon_threadsafe(ready.set)

        while True:
            with self._cond:
                got, event = self._take()
                if not got and self._closed:
                    return
                if not got:
                    ready.clear()
                    self._wake = wake
            if got:
                yield event
                continue
            try:
                await ready.wait()
            finally:
                with self._cond:
                    self._wake = None
