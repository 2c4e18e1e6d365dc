"""A streamed chat completion: `chat.completion.chunk` server-sent events as the VLM generates.

The pipeline runs in a worker thread; each token of the answer crosses to the event loop through
a `cascade.streaming.TokenChannel` (closed when the run ends) and leaves as one content chunk, so
the first chunk arrives after the time to first token, not after the answer. A tool answer (OCR read
the sign)
generated no tokens: its text leaves at once, as one chunk. With n > 1 each token's chunk names its
choice (`index`, from the token event's `choice`); a tool answer sends its text once per choice.
With `logprobs` each token's chunk carries its entry (a token whose text is held back, an
incomplete character or the start of a possible stop string, still sends its logprobs with empty
content). Each choice ends with a chunk carrying its `finish_reason`; the last carries the
`cascade` extra field (evidence, bill, trace); a usage chunk follows when
`stream_options.include_usage` asks for it; then `data: [DONE]`.

HTTP status codes only exist before the first byte: a request that fails before its first token
(400, 429, 504 in the queue, a pipeline error) gets its status as usual. Once streaming has
started, an error is sent as an event `{"error": {...}}` followed by `[DONE]`, as OpenAI and vLLM
do. A client that disconnects mid-stream cancels the run (the VLM stops at its next token) and is
counted as 499; so is a client that stays connected but stops reading: once a chunk has waited
`send_timeout` seconds for it, the stream is dropped and its run cancelled, so its slot is free
again (the connection itself closes when the client reads or hangs up).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi.responses import StreamingResponse

from .bill import openai_usage
from .choices import completions_of
from .errors import APIError
from .responses import ChatCompletionChunk

__all__ = ["event_stream"]

log = logging.getLogger("cascade.serve")


class _ClientStalled(Exception):
    """The client took no chunk for `send_timeout` seconds."""


class _EventStream(StreamingResponse):
    """A StreamingResponse that runs `close` however it ends, even when the client is gone
    before the body's generator started (its own `finally` would then never run), and that gives
    up on a client that stops reading (`send_timeout`)."""

    def __init__(self, body: AsyncIterator[str], close: Callable[[], None], send_timeout: float):
        super().__init__(
            body, media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )
        self._close, self._send_timeout = close, send_timeout

    async def __call__(self, scope, receive, send) -> None:
        async def timed_send(message) -> None:
            try:  # the server's send waits while the client's socket buffers are full
                await asyncio.wait_for(send(message), self._send_timeout)
            except asyncio.TimeoutError:
                raise _ClientStalled() from None

        try:
            await super().__call__(scope, receive, timed_send)
        except _ClientStalled:
            log.warning(
                "a streaming client took no data for %g s (--send-timeout): stream "
                "dropped, its run cancelled",
                self._send_timeout,
            )
        finally:
            self._close()


def _sse(obj: Any) -> str:
    return f"data: {json.dumps(obj)}\n\n"


def event_stream(
    tokens: AsyncIterator[Any],
    work: asyncio.Future,
    first: Any | None,
    *,
    model: str,
    cid: str,
    created: int,
    include_usage: bool,
    extra: Callable[[Any], dict[str, Any]],
    finished: Callable[[int], None],
    send_timeout: float = 30.0,
    n: int = 1,
    logprobs: bool = False,
) -> StreamingResponse:
    """The response for a run that has produced its first token (`first`; the rest come from
    `tokens`, which ends with the run) or, for a tool answer, has finished (`first` None).
    extra(answer): the `cascade` field of the last chunk. finished(status) is called when the stream
    ends (200, an error's status, or 499), maybe
    more than once: the first call counts. n, logprobs: the request's (module docstring)."""

    def chunk(
        delta: dict[str, Any],
        finish: str | None = None,
        index: int = 0,
        lp: dict[str, Any] | None = None,
        **more: Any,
    ) -> dict[str, Any]:
        choices = [{"index": index, "delta": delta, "logprobs": lp, "finish_reason": finish}]
        return ChatCompletionChunk(
            id=cid,
            object="chat.completion.chunk",
            created=created,
            model=model,
            choices=choices,
            **more,
        ).model_dump(mode="json", exclude_unset=True)

    def close(status: int = 499) -> None:  # 499 unless the stream ended on its own
        if not work.done():  # the client went away: the run stops at its next token
            work.cancel()
        finished(status)

    async def events() -> AsyncIterator[str]:
        status = 499
        streamed: dict[int, list[str]] = {}  # choice -> the texts sent
        try:
            for i in range(n):
                streamed[i] = []
                yield _sse(chunk({"role": "assistant", "content": ""}, index=i))
            event = first
            while event is not None:
                if event.choice not in streamed:  # more completions than asked (the stage's n)
                    streamed[event.choice] = []
                    yield _sse(chunk({"role": "assistant", "content": ""}, index=event.choice))
                entry = event.entry if logprobs else None
                # text "" while a character is incomplete, a stop string may be starting, or EOS
                if event.text or entry is not None:
                    streamed[event.choice].append(event.text)
                    lp = {"content": [entry.to_openai()]} if entry is not None else None
                    yield _sse(chunk({"content": event.text}, index=event.choice, lp=lp))
                event = await anext(tokens, None)
            try:
                answer = await work
                done = completions_of(answer, n)
                for i, c in enumerate(done):
                    text = "".join(streamed.get(i, ()))
                    if not c.text.startswith(text):
                        # A pipeline whose streaming VLM stage was not its final answer (a draft
                        # a router replaced): the client has text that is not the answer.
                        log.error("streamed text is not the answer of %s", model)
                        raise APIError(
                            500,
                            "the pipeline streamed a draft that is not its final "
                            "answer (a vlm_answer stage whose answer a router may "
                            "replace needs `stream: false`)",
                            code="stream_mismatch",
                        )
                    if i not in streamed:
                        yield _sse(chunk({"role": "assistant", "content": ""}, index=i))
                    if c.text[len(text) :]:  # a tool answer, or a stage that did not stream
                        yield _sse(chunk({"content": c.text[len(text) :]}, index=i))
                for i, c in enumerate(done):
                    last = {"cascade": extra(answer)} if i == len(done) - 1 else {}
                    yield _sse(chunk({}, c.finish_reason, index=i, **last))
                if include_usage:
                    yield _sse(
                        ChatCompletionChunk(
                            id=cid,
                            object="chat.completion.chunk",
                            created=created,
                            model=model,
                            choices=[],
                            usage=openai_usage(answer),
                        ).model_dump(mode="json", exclude_unset=True)
                    )
                status = 200
            except APIError as e:
                status = e.status
                yield _sse(e.body())
            except Exception as e:  # a bug: report it in the stream, keep serving
                log.exception("streamed chat completion failed")
                status = 500
                yield _sse(
                    APIError(
                        500, f"internal error: {type(e).__name__}", code="internal_error"
                    ).body()
                )
            yield "data: [DONE]\n\n"
        finally:
            close(status)

    return _EventStream(events(), close, send_timeout)
