"""A minimal OpenAI-compatible chat server over the transformers backend (test helper only).

Serves POST /v1/chat/completions (plain and streamed as server-sent events) and the same under
/v1/quiet/..., which leaves `prompt_tokens_details.image_tokens` out of the usage, as some servers
do.
"""

from __future__ import annotations

import base64
import io
import json
import socket
import threading
import time

from cascade.artifacts import Image


def _parse(body: dict):
    """(system prompt, images, history, question) of a chat request."""
    system, images, turns = None, [], []
    for msg in body["messages"]:
        content = msg["content"]
        if msg["role"] == "system":
            system = content if isinstance(content, str) else content[0]["text"]
            continue
        if msg["role"] == "assistant":
            turns[-1][1] = content if isinstance(content, str) else content[0]["text"]
            continue
        for part in [content] if isinstance(content, str) else content:
            if isinstance(part, str) or part.get("type") == "text":
                turns.append([part if isinstance(part, str) else part["text"], None])
            elif part.get("type") == "image_url":
                from PIL import Image as PILImage

                data = part["image_url"]["url"].split(",", 1)[1]
                images.append(Image.from_pil(PILImage.open(io.BytesIO(base64.b64decode(data)))))
    return system, images, [tuple(t) for t in turns[:-1]], turns[-1][0]


def make_app(vlm):
    from fastapi import FastAPI, HTTPException
    from fastapi.responses import StreamingResponse

    app = FastAPI()

    def answer(body: dict, report_images: bool):
        system, images, history, question = _parse(body)
        if body.get("model") != vlm.model_id:
            raise HTTPException(404, f"model {body.get('model')} not served")
        r = vlm.generate(
            images,
            question,
            max_new_tokens=body.get("max_tokens", 16),
            system_prompt=system,
            history=history,
        )
        b = r.bill
        usage = {
            "prompt_tokens": b.input_tokens,
            "completion_tokens": b.generated_tokens,
            "total_tokens": b.input_tokens + b.generated_tokens,
        }
        if report_images:
            usage["prompt_tokens_details"] = {"image_tokens": b.visual_tokens}
        logprobs = {
            "content": [{"token": "", "logprob": lp, "top_logprobs": []} for lp in r.logprobs]
        }
        if not body.get("stream"):
            return {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": vlm.model_id,
                "usage": usage,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": r.finish_reason,
                        "logprobs": logprobs,
                        "message": {"role": "assistant", "content": r.text},
                    }
                ],
            }

        def events():
            head = {
                "id": "chatcmpl-test",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": vlm.model_id,
            }
            for i in range(0, len(r.text), 3):  # pieces whose concatenation is the text
                delta = {"index": 0, "delta": {"content": r.text[i : i + 3]}, "finish_reason": None}
                yield f"data: {json.dumps({**head, 'choices': [delta]})}\n\n"
            end = {"index": 0, "delta": {}, "finish_reason": r.finish_reason}
            yield f"data: {json.dumps({**head, 'choices': [end]})}\n\n"
            yield f"data: {json.dumps({**head, 'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post("/v1/chat/completions")
    def chat(body: dict):
        return answer(body, report_images=True)

    @app.post("/v1/quiet/chat/completions")
    def chat_quiet(body: dict):
        return answer(body, report_images=False)

    return app


def serve_in_thread(app):
    """Start uvicorn on a free 127.0.0.1 port; returns (base_url, server) — set
    server.should_exit."""
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.time() + 20
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}/v1", server
