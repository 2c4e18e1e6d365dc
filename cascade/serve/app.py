"""The FastAPI app: OpenAI-compatible chat completions over cascade pipelines, plus health,
models, Prometheus metrics and (optionally) the Gradio demo at /demo.

    uvicorn --factory cascade.serve.app:app_from_env     # or: cascade serve --tiny

Every error is an OpenAI-style JSON body (`{"error": {"message", "type", "param", "code"}}`); a bad
request only ever fails itself.
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
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (JSONResponse, PlainTextResponse, RedirectResponse, Response,
                               StreamingResponse)
from starlette.exceptions import HTTPException as StarletteHTTPException

from .bill import bill_of, openai_usage
from .config import ServeConfig
from .engine import Engine
from .errors import APIError, error_body
from .protocol import parse_chat_request

__all__ = ["create_app", "completion_body", "stream_chunks"]

log = logging.getLogger("cascade.serve")
T = TypeVar("T")
_BODY_OVERHEAD = 1 << 20  # JSON and text around the base64 media


async def _read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it passes `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise APIError(413, f"request body is {int(declared):,} bytes, over this server's limit of "
                       f"{limit:,} bytes (--max-upload-mb, base64 included)", code="upload_too_large")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise APIError(413, f"request body is over this server's limit of {limit:,} bytes "
                           "(--max-upload-mb, base64 included)", code="upload_too_large")
        chunks.append(chunk)
    return b"".join(chunks)


def cascade_extra(answer) -> dict[str, Any]:
    """The extra top-level `cascade` field: who answered, the evidence, the bill, the trace and
    its warnings (e.g. a truncated video answered from the part that decodes)."""
    trace = answer.trace
    return {"produced_by": answer.produced_by, "evidence": answer.evidence.to_dict(),
            "bill": bill_of(answer), "warnings": trace.warnings if trace is not None else [],
            "trace": trace.to_dict() if trace is not None else None}


def completion_body(answer, model: str, cid: str, created: int) -> dict[str, Any]:
    return {"id": cid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.text},
                         "logprobs": None,
                         "finish_reason": answer.usage.get("finish_reason", "stop")}],
            "usage": openai_usage(answer), "cascade": cascade_extra(answer)}


def _pieces(text: str) -> list[str]:
    """Word-sized pieces whose concatenation is `text` exactly."""
    out, cur = [], ""
    for ch in text:
        cur += ch
        if ch.isspace():
            out.append(cur)
            cur = ""
    return out + ([cur] if cur else [])


def stream_chunks(answer, model: str, cid: str, created: int, include_usage: bool) -> list[dict]:
    """`chat.completion.chunk` objects for a finished answer (role, content pieces, finish)."""
    def chunk(delta: dict, finish: str | None = None, **extra: Any) -> dict:
        return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                **extra}

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": p}) for p in _pieces(answer.text)]
    chunks.append(chunk({}, answer.usage.get("finish_reason", "stop"), cascade=cascade_extra(answer)))
    if include_usage:
        chunks.append({"id": cid, "object": "chat.completion.chunk", "created": created,
                       "model": model, "choices": [], "usage": openai_usage(answer)})
    return chunks


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


def create_app(config: ServeConfig | None = None, *, engine: Engine | None = None,
               demo: bool = False) -> FastAPI:
    """The server app. `engine` lets tests share one; `demo` mounts the Gradio UI at /demo."""
    config = config or (engine.config if engine else ServeConfig())
    engine = engine or Engine(config)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        engine.close()

    app = FastAPI(title="vlm-cascade", lifespan=lifespan,
                  description="OpenAI-compatible chat completions over coarse-to-fine VLM pipelines")
    app.state.engine = engine
    body_limit = config.max_upload_bytes * 4 // 3 + _BODY_OVERHEAD

    @app.exception_handler(APIError)
    async def _api_error(request: Request, e: APIError):
        return JSONResponse(e.body(), status_code=e.status, headers=e.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, e: StarletteHTTPException):
        typ = "not_found_error" if e.status_code == 404 else "invalid_request_error"
        return JSONResponse(error_body(str(e.detail), typ, None, str(e.status_code)),
                            status_code=e.status_code)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, e: RequestValidationError):
        return JSONResponse(error_body(str(e.errors()), "invalid_request_error"), status_code=400)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        t0, model_label, status = time.perf_counter(), "unknown", 500
        engine.metrics.add_in_flight(1)
        try:
            raw = await _read_body(request, body_limit)
            try:
                body = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise APIError(400, f"request body is not valid JSON: {e}", code="invalid_json") from None
            req = parse_chat_request(body)
            served = engine.get(req.model)
            model_label = served.id
            answer = await _unless_disconnected(request, engine.run_async(req, served))
            if answer is None:
                status = 499  # nginx's "client closed request": not a server error
                return Response(status_code=499)
            cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
            status = 200
            if not req.stream:
                return JSONResponse(completion_body(answer, req.model, cid, created))
            chunks = stream_chunks(answer, req.model, cid, created, req.include_usage)

            async def events():
                for c in chunks:
                    yield f"data: {json.dumps(c)}\n\n"
                yield "data: [DONE]\n\n"

            return StreamingResponse(events(), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        except APIError as e:
            status = e.status
            raise
        except Exception as e:  # a bug: answer 500 in OpenAI's shape, keep serving
            log.exception("chat completion failed")
            raise APIError(500, f"internal error: {type(e).__name__}", code="internal_error") from None
        finally:
            engine.metrics.add_in_flight(-1)
            engine.metrics.inc("cascade_requests_total", (model_label, str(status)))
            engine.metrics.observe("cascade_request_latency_seconds", (model_label,),
                                   time.perf_counter() - t0)

    @app.get("/v1/models")
    async def list_models():
        return {"object": "list", "data": [
            {"id": m.id, "object": "model", "created": 0, "owned_by": "vlm-cascade",
             "root": m.source, "description": m.description,
             "media": sorted(set(m.media_types.values()))} for m in engine.models.values()]}

    @app.get("/health")
    async def health():
        return {"status": "ok", "models": list(engine.models), "busy": engine.busy,
                "queued": engine.queued, "max_concurrent": config.max_concurrent,
                "max_queue": config.max_queue,
                "random_weights": config.random_weights}

    @app.get("/metrics")
    async def metrics():
        return PlainTextResponse(engine.metrics.render(),
                                 media_type="text/plain; version=0.0.4; charset=utf-8")

    if demo:
        import gradio as gr

        from .demo import build_demo, DEMO_CSS

        gr.mount_gradio_app(app, build_demo(engine), path="/demo", css=DEMO_CSS)

        @app.get("/", include_in_schema=False)
        async def root():
            return RedirectResponse("/demo/")
    else:
        @app.get("/", include_in_schema=False)
        async def root():
            return {"service": "vlm-cascade", "endpoints": ["/v1/chat/completions", "/v1/models",
                                                            "/health", "/metrics"]}
    return app
