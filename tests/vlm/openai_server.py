"""A minimal OpenAI-compatible chat server over the transformers backend (test helper only)."""
from __future__ import annotations

import base64
import io
import socket
import threading
import time

from cascade.artifacts import Image


def make_app(vlm):
    from fastapi import FastAPI, HTTPException
    from PIL import Image as PILImage

    app = FastAPI()

    @app.post("/v1/chat/completions")
    def chat(body: dict):
        system, images, question = None, [], None
        for msg in body["messages"]:
            content = msg["content"]
            if msg["role"] == "system":
                system = content if isinstance(content, str) else content[0]["text"]
                continue
            for part in [content] if isinstance(content, str) else content:
                if isinstance(part, str) or part.get("type") == "text":
                    question = part if isinstance(part, str) else part["text"]
                elif part.get("type") == "image_url":
                    data = part["image_url"]["url"].split(",", 1)[1]
                    images.append(Image.from_pil(PILImage.open(io.BytesIO(base64.b64decode(data)))))
        if body.get("model") != vlm.model_id:
            raise HTTPException(404, f"model {body.get('model')} not served")
        r = vlm.generate(images, question, max_new_tokens=body.get("max_tokens", 16),
                         system_prompt=system)
        n_in = r.visual_tokens + r.prompt_tokens
        return {"id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                "model": vlm.model_id,
                "choices": [{"index": 0, "finish_reason": r.finish_reason,
                             "message": {"role": "assistant", "content": r.text}}],
                "usage": {"prompt_tokens": n_in, "completion_tokens": r.generated_tokens,
                          "total_tokens": n_in + r.generated_tokens,
                          "prompt_tokens_details": {"image_tokens": r.visual_tokens}}}

    return app


def serve_in_thread(app):
    """Start uvicorn on a free 127.0.0.1 port; returns (base_url, server) — set server.should_exit."""
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
