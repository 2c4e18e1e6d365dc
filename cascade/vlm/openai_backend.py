"""The scale-out backend: any OpenAI-compatible chat server (vLLM, SGLang, LMDeploy, ...).

Images travel as base64 PNG data-URL parts of one user message, before the question (the same
layout the in-process backend uses, so a server's automatic prefix caching can reuse the visual
prefix across questions). Token accounting comes from the response's `usage`: prompt_tokens counts
visual + text tokens together; when the server also reports the visual share
(`usage.prompt_tokens_details.image_tokens`, or `usage.visual_tokens`) it is split out. The cost
model only needs their sum, so FLOPs are right either way once `model_shape` is given. Requests ask
for `logprobs`; when the server returns them (`choices[0].logprobs.content[*].logprob`) the result's
`confidence` is their geometric-mean probability, as in the in-process backend, else None.

Reduction, the KV prefix cache and sessions run inside the serving engine, not here: a reduction
other than `none` raises, and sessions are refused.
"""
from __future__ import annotations

import base64
import io
import time
from typing import Any

from ..cost import ModelShape, decode_flops, prefill_flops
from ..errors import CascadeError, InputError
from .media import as_images
from .reduction import ReductionConfig
from .result import VLMResult, geometric_confidence

__all__ = ["OpenAIBackend", "image_data_url"]


def image_data_url(image: Any) -> str:
    """A PNG data URL of an `Image` (lossless, so the server sees exactly our pixels)."""
    buf = io.BytesIO()
    image.to_pil().save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def response_confidence(choice: dict) -> float | None:
    """Geometric-mean token probability from a chat choice's `logprobs`; None when absent."""
    content = (choice.get("logprobs") or {}).get("content") or []
    lps = [c.get("logprob") for c in content if isinstance(c, dict)]
    if not lps or any(not isinstance(lp, (int, float)) for lp in lps):
        return None
    return geometric_confidence([float(lp) for lp in lps])


class OpenAIBackend:
    """model: the served model name. base_url: the server's /v1 root. model_shape: the served
    model's (params, layers, hidden) for FLOPs accounting (0.0 FLOPs when not given)."""

    name = "openai"

    def __init__(self, model: str, base_url: str = "http://127.0.0.1:8000/v1",
                 api_key: str | None = None, timeout: float = 300.0,
                 model_shape: ModelShape | None = None, client: Any = None):
        import httpx

        self.model_id = model
        self.base_url = base_url.rstrip("/")
        self.model_shape = model_shape
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx.Client(timeout=timeout, headers=headers)

    def messages(self, images: list, question: str, system_prompt: str | None) -> list[dict]:
        parts: list[dict] = [{"type": "image_url", "image_url": {"url": image_data_url(im)}}
                             for im in images]
        parts.append({"type": "text", "text": question})
        msgs = [{"role": "system", "content": system_prompt}] if system_prompt is not None else []
        return msgs + [{"role": "user", "content": parts}]

    def generate(self, images: Any, question: str, *, max_new_tokens: int = 64,
                 reduction: ReductionConfig | None = None, system_prompt: str | None = None) -> VLMResult:
        import httpx

        images = as_images(images)
        if not images:
            raise InputError("no image given: this VLM call needs at least one image")
        if not isinstance(question, str) or not question.strip():
            raise InputError(f"the question must be a non-empty string, got {question!r}")
        red = reduction or ReductionConfig()
        if not red.is_identity:
            raise InputError(f"the openai backend cannot apply reduction '{red.method}': token "
                             "pruning runs inside the serving engine; configure it there")
        body = {"model": self.model_id, "messages": self.messages(images, question, system_prompt),
                "max_tokens": max_new_tokens, "temperature": 0.0, "logprobs": True}
        t0 = time.perf_counter()
        try:
            resp = self._client.post(f"{self.base_url}/chat/completions", json=body)
        except httpx.HTTPError as e:
            raise CascadeError(f"VLM server at {self.base_url} unreachable: {e}") from e
        if resp.status_code != 200:
            raise CascadeError(f"VLM server at {self.base_url} answered {resp.status_code}: "
                               f"{resp.text[:500]}")
        total = time.perf_counter() - t0
        data = resp.json()
        choice = data["choices"][0]
        usage = data.get("usage") or {}
        n_in = int(usage.get("prompt_tokens", 0))
        n_out = int(usage.get("completion_tokens", 0))
        details = usage.get("prompt_tokens_details") or {}
        n_vis = int(details.get("image_tokens") or usage.get("visual_tokens") or 0)
        n_text = n_in - n_vis
        shape = self.model_shape
        pre = prefill_flops(shape, n_vis, n_text) if shape else 0.0
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return VLMResult(
            text=choice["message"].get("content") or "", token_ids=(), finish_reason=finish,
            model=self.model_id, backend=self.name, visual_tokens=n_vis, visual_tokens_before=n_vis,
            prompt_tokens=n_text, generated_tokens=n_out, prefill_flops=pre,
            baseline_prefill_flops=pre, computed_prefill_flops=pre,
            decode_flops=decode_flops(shape, n_vis, n_text, n_out) if shape else 0.0,
            # Without streaming the first token is only seen with the last: ttft is an upper bound.
            ttft_s=total, tpot_s=None, total_s=total, vision_s=0.0, prefill_s=0.0, cache="off",
            reduction={"method": red.method, "keep_ratio": red.keep_ratio},
            confidence=response_confidence(choice))

    def session(self, images: Any, **_: Any) -> Any:
        raise CascadeError("sessions need the transformers backend; against a server, send each "
                           "question with the same images and let its prefix caching reuse them")

    def close(self) -> None:
        self._client.close()
