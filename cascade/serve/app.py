"""The FastAPI app: OpenAI-compatible chat completions over cascade pipelines, plus readiness and
liveness, models, Prometheus metrics and (optionally) the Gradio demo at /demo.

    cascade serve --tiny        # or in Python: uvicorn.run(create_app(ServeConfig(tiny=True)))

The contract is published at /openapi.json (`openapi.py`): the request and response models
(`schema.py`, `responses.py`) and every status each route answers. Every error is an OpenAI-style
JSON body (`{"error": {"message", "type", "param", "code"}}`); a bad request only fails itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..streaming import TokenChannel
from .bill import bill_of, openai_usage
from .choices import message_choices
from .config import ServeConfig
from .engine import Engine
from .errors import APIError, error_body
from .metrics import CONTENT_TYPE, Metrics
from .openapi import CHAT_BODY, CHAT_OK, json_response, publish, responses_for
from .protocol import ChatRequest, json_number, parse_chat_request
from .responses import ChatCompletion, Health, Liveness, ModelList
from .sse import event_stream

__all__ = ["create_app", "completion_body", "cascade_extra"]

log = logging.getLogger("cascade.serve")
T = TypeVar("T")
_BODY_OVERHEAD = 1 << 20  # JSON and text around the base64 media


async def _read_body(request: Request, limit: int, timeout: float) -> bytes:
    """The request body, refused with 413 as soon as it passes `limit` bytes and with 408 when it
    has not all arrived after `timeout` seconds (a slow or stalled upload fails alone: the body
    is read before the request takes a slot)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise APIError(
            413,
            f"request body is {int(declared):,} bytes, over this server's limit of "
            f"{limit:,} bytes (--max-upload-mb, base64 included)",
            code="upload_too_large",
        )
    chunks, size = [], 0

    async def read() -> None:
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise APIError(
                    413,
                    f"request body is over this server's limit of {limit:,} bytes "
                    "(--max-upload-mb, base64 included)",
                    code="upload_too_large",
                )
            chunks.append(chunk)

    try:
        await asyncio.wait_for(read(), timeout)
    except asyncio.TimeoutError:
        raise APIError(
            408,
            f"the request body did not arrive within {timeout:g} s "
            f"(--upload-timeout; {size:,} bytes came)",
            code="upload_timeout",
            headers={"Connection": "close"},
        ) from None
    return b"".join(chunks)


def _check_content_type(request: Request) -> None:
    """A body that declares a type must declare JSON (none at all is read as JSON)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    json_like = kind in ("application/json", "text/json") or (
        kind.startswith("application/") and kind.endswith("+json")
    )
    if kind and not json_like:
        raise APIError(
            415,
            f"the body must be JSON (Content-Type: application/json), not {kind[:60]!r}",
            code="unsupported_media_type",
            param=None,
        )


def cascade_extra(answer) -> dict[str, Any]:
    """The extra top-level `cascade` field: who answered, the evidence, the bill, the trace and
    its warnings (e.g. a truncated video answered from the part that decodes)."""
    trace = answer.trace
    return {
        "produced_by": answer.produced_by,
        "evidence": answer.evidence.to_dict(),
        "bill": bill_of(answer),
        "warnings": trace.warnings if trace is not None else [],
        "trace": trace.to_dict() if trace is not None else None,
    }


def completion_body(
    answer, model: str, cid: str, created: int, n: int = 1, logprobs: bool = False
) -> dict[str, Any]:
    return ChatCompletion(
        id=cid,
        object="chat.completion",
        created=created,
        model=model,
        choices=message_choices(answer, n, logprobs),
        usage=openai_usage(answer),
        cascade=cascade_extra(answer),
    ).model_dump(mode="json", exclude_unset=True)


class _Outcome:
    """A chat request's metrics, recorded exactly once: when the response is returned, or for a
    stream, when the stream ends."""

    def __init__(self, metrics: Metrics):
        self.metrics, self.t0, self.model, self._done = (
            metrics,
            time.perf_counter(),
            "unknown",
            False,
        )
        metrics.add_in_flight(1)

    def done(self, status: int) -> None:
        if self._done:
            return
        self._done = True
        self.metrics.add_in_flight(-1)
        self.metrics.inc("cascade_requests_total", (self.model, str(status)))
        self.metrics.observe(
            "cascade_request_latency_seconds", (self.model,), time.perf_counter() - self.t0
        )


async def _unless_disconnected(request: Request, work: Awaitable[T]) -> T | None:
    """`work`'s result, or None (with `work` cancelled) if the client disconnects first."""

    async def disconnected() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    task, gone = asyncio.ensure_future(work), asyncio.ensure_future(disconnected())
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, APIError):
        await task
    return None


def create_app(
    config: ServeConfig | None = None, *, engine: Engine | None = None, demo: bool = False
) -> FastAPI:
    """The server app. `engine` lets tests share one; `demo` mounts the Gradio UI at /demo. The
    served pipelines' models load in the background from start-up; /health says when they are
    ready."""
    config = config or (engine.config if engine else ServeConfig())
    engine = engine or Engine(config)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        engine.load_models()
        yield
        engine.close()

    app = FastAPI(
        title="vlm-cascade",
        lifespan=lifespan,
        version="1",
        description="OpenAI-compatible chat completions over coarse-to-fine VLM "
        "pipelines. Media go in `image_url` / `video_url` content parts as base64 data "
        "URLs (or file URLs under the server's --media-root, or http(s) URLs from the hosts "
        "its --allowed-media-domains names); images also as `image_embeds` parts (`cascade "
        "embed`); PDF documents in `file` parts (`file_data`), one image per page.",
    )
    app.state.engine = engine
    body_limit = config.max_upload_bytes * 4 // 3 + _BODY_OVERHEAD

    @app.exception_handler(APIError)
    async def _api_error(request: Request, e: APIError):
        return JSONResponse(e.body(), status_code=e.status, headers=e.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, e: StarletteHTTPException):
        # 404 for an unknown path, 405 for a known path and another method (with its `Allow`).
        typ = "not_found_error" if e.status_code == 404 else "invalid_request_error"
        return JSONResponse(
            error_body(str(e.detail), typ, None, str(e.status_code)),
            status_code=e.status_code,
            headers=e.headers,
        )

    async def _stream(request: Request, req: ChatRequest, served, outcome: _Outcome) -> Response:
        """Run the request and answer with server-sent events once its first token (or, for a
        tool answer, the whole answer) is there; failures before that keep their HTTP status."""
        channel = TokenChannel()
        work = asyncio.ensure_future(engine.run_async(req, served, on_token=channel.put))
        work.add_done_callback(lambda _: channel.close())
        tokens = aiter(channel)
        try:
            first = await _unless_disconnected(request, anext(tokens, None))
        except BaseException:
            work.cancel()
            raise
        if first is None and not work.done():  # the client went away before the first token
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError, APIError):
                await work
            return Response(status_code=499)
        if first is None:
            work.result()  # a failure before any token: raises its APIError here
        return event_stream(
            tokens,
            work,
            first,
            model=req.model,
            cid=f"chatcmpl-{uuid.uuid4().hex}",
            created=int(time.time()),
            include_usage=req.include_usage,
            n=req.n,
            logprobs=req.logprobs,
            extra=cascade_extra,
            finished=outcome.done,
            send_timeout=config.send_timeout_s,
        )

    @app.post(
        "/v1/chat/completions",
        response_model=None,
        openapi_extra=CHAT_BODY,
        summary="Answer a question about images or a video",
        responses={
            200: CHAT_OK,
            **responses_for([400, 404, 408, 413, 415, 429, 499, 500, 503, 504, 507]),
        },
    )
    async def chat_completions(request: Request):
        outcome, status, streaming = _Outcome(engine.metrics), 500, False
        try:
            _check_content_type(request)
            raw = await _read_body(request, body_limit, config.upload_timeout_s)
            try:
                body = json.loads(raw, parse_float=json_number)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise APIError(
                    400, f"request body is not valid JSON: {e}", code="invalid_json"
                ) from None
            req = parse_chat_request(body)
            served = engine.get(req.model)
            outcome.model = served.id
            if req.stream:
                response = await _stream(request, req, served, outcome)
                # A stream records its own outcome when it ends; an early 499 is recorded here.
                streaming, status = response.status_code == 200, response.status_code
                return response
            answer = await _unless_disconnected(request, engine.run_async(req, served))
            if answer is None:
                status = 499  # nginx's "client closed request": not a server error
                return Response(status_code=499)
            status = 200
            return JSONResponse(
                completion_body(
                    answer,
                    req.model,
                    f"chatcmpl-{uuid.uuid4().hex}",
                    int(time.time()),
                    req.n,
                    req.logprobs,
                )
            )
        except APIError as e:
            status = e.status
            raise
        except asyncio.CancelledError:
            # The server is stopping and its drain time (--drain-timeout) is over; a client that
            # went away is handled by `_unless_disconnected`, not here.
            status = 503
            return JSONResponse(
                error_body(
                    "the server stopped before this request finished (--drain-timeout); retry",
                    "server_error",
                    None,
                    "shutting_down",
                ),
                status_code=503,
            )
        except Exception as e:  # a bug: answer 500 in OpenAI's shape, keep serving
            log.exception("chat completion failed")
            raise APIError(
                500, f"internal error: {type(e).__name__}", code="internal_error"
            ) from None
        finally:
            if not streaming:
                outcome.done(status)

    @app.get(
        "/v1/models",
        response_model=None,
        summary="The served models (one per pipeline)",
        responses={200: json_response("the served models", ModelList)},
    )
    async def list_models():
        return {
            "object": "list",
            "data": [
                {
                    "id": m.id,
                    "object": "model",
                    "created": 0,
                    "owned_by": "vlm-cascade",
                    "root": m.source,
                    "description": m.description,
                    "media": sorted(set(m.media_types.values())),
                }
                for m in engine.models.values()
            ],
        }

    @app.get(
        "/health",
        response_model=None,
        summary="Readiness: can every pipeline answer?",
        responses={
            200: json_response("every served pipeline can answer", Health),
            503: json_response(
                "something is still starting (or failed): `waiting_for` says what", Health
            ),
        },
    )
    async def health():
        ready, fields = await asyncio.to_thread(engine.readiness.check)
        body = {
            **fields,
            "busy": engine.busy,
            "queued": engine.queued,
            "max_concurrent": config.max_concurrent,
            "max_queue": config.max_queue,
            "random_weights": config.random_weights,
        }
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get(
        "/health/live",
        response_model=None,
        summary="Liveness: the process serves HTTP",
        responses={200: json_response("alive (models may still be loading)", Liveness)},
    )
    async def live():
        return {"status": "alive"}

    @app.get(
        "/metrics",
        response_model=None,
        summary="Prometheus metrics",
        response_class=PlainTextResponse,
        responses={
            200: {
                "description": "Prometheus text exposition format",
                "content": {CONTENT_TYPE.split(";")[0]: {"schema": {"type": "string"}}},
            }
        },
    )
    async def metrics():
        text = await asyncio.to_thread(engine.metrics.render)  # collectors may block (Ray)
        return Response(text, media_type=CONTENT_TYPE)

    publish(app, {m.id: set(m.media_types.values()) for m in engine.models.values()})
    if demo:
        from .demo import mount_demo

        mount_demo(app, engine)

        @app.get("/", include_in_schema=False)
        async def root():
            return RedirectResponse("/demo/")
    else:

        @app.get("/", include_in_schema=False)
        async def root():
            return {
                "service": "vlm-cascade",
                "endpoints": [
                    "/v1/chat/completions",
                    "/v1/models",
                    "/health",
                    "/health/live",
                    "/metrics",
                    "/openapi.json",
                ],
            }

    return app
