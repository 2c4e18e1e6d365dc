"""Stream a run's answer tokens to its caller as the VLM generates them.

The caller (the server, `QA.ask(on_token=...)`) opens `answer_stream(on_token)` around
`Pipeline.run`. The runner copies the caller's context into the threads stages run in, so a VLM
stage finds the stream with `claim_stream(stage_name)` without any signature carrying it.

One VLM call per run streams: the first stage that claims it. A stage whose answer is a draft
(video_qa_selfcheck's thumbnail pass, whose confidence decides whether to look closer) has
`stream: false` and never claims, so the tokens the caller sees are the final answer's. A tool
answer claims nothing: the caller sends its text at once. `streamed_by` names the stage that
claimed, so a caller whose final answer is not what streamed can say which stage to fix.

`on_token` runs in the stage's thread, once per generated token; an exception it raises (e.g. the
server's "client went away") stops the generation and fails the run.
"""
from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["AnswerStream", "answer_stream", "claim_stream", "silent", "is_silent"]

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
    "cascade_answer_stream", default=None)


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

