"""The backend protocol and the `VLM` facade users hold.

A backend answers a question about images and bills it (`VLMResult`); it may also open sessions.
Backends register by short name; `VLM.load(model, backend="transformers")` picks one.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from ..errors import InputError, did_you_mean
from .reduction import ReductionConfig
from .result import VLMResult

__all__ = ["Backend", "VLM", "register_backend", "BACKENDS"]


@runtime_checkable
class Backend(Protocol):
    name: str
    model_id: str

    def generate(self, images: Any, question: str, *, max_new_tokens: int = 64,
                 reduction: ReductionConfig | None = None,
                 system_prompt: str | None = None) -> VLMResult: ...

    def session(self, images: Any, *, system_prompt: str | None = None,
                reduction: ReductionConfig | None = None, max_new_tokens: int = 64) -> Any: ...


def _load_transformers(model: str, **opts: Any) -> Backend:
    from .transformers_backend import TransformersBackend

    return TransformersBackend.load(model, **opts)


def _load_openai(model: str, **opts: Any) -> Backend:
    from .openai_backend import OpenAIBackend

    opts.pop("device", None), opts.pop("dtype", None)  # the server decides those
    if "kernels" in opts:
        raise InputError("`kernels` picks the in-process Triton/torch ops of the transformers "
                         "backend; an openai-compatible server runs its own kernels")
    return OpenAIBackend(model, **opts)


BACKENDS: dict[str, Callable[..., Backend]] = {"transformers": _load_transformers,
                                               "openai": _load_openai}


def register_backend(name: str, loader: Callable[..., Backend]) -> None:
    """Add a backend: `loader(model, **opts)` returns an object satisfying `Backend`."""
    if name in BACKENDS:
        raise InputError(f"VLM backend '{name}' is already registered")
    BACKENDS[name] = loader


class VLM:
    """A vision-language model behind any backend.

    >>> vlm = VLM.load("Qwen/Qwen2-VL-2B-Instruct", kv_cache_bytes=2 << 30)
    >>> r = vlm.generate([image], "What is on the sign?", reduction=ReductionConfig("divprune", 0.25))
    >>> r.text, r.visual_tokens, r.usage["prefill_savings"]
    """

    def __init__(self, backend: Backend):
        self.backend = backend

    @classmethod
    def load(cls, model: str, backend: str = "transformers", device: str = "auto",
             dtype: Any = "auto", kernels: Literal["auto", "triton", "torch"] = "auto",
             **opts: Any) -> "VLM":
        """model: hub id, local folder, or (openai) the served model name; opts go to the backend
        (transformers: kv_cache_bytes, kv_int8, kv_cache, attn_implementation, context_window,
        min_pixels, max_pixels; openai: base_url, api_key, timeout).

        kernels (transformers backend): "auto" runs the cascade.kernels Triton ops on CUDA and
        their torch references on CPU; "triton" forces Triton (on CPU only under
        TRITON_INTERPRET=1); "torch" the references. Passed to the backend only when not "auto"."""
        if backend not in BACKENDS:
            raise InputError(f"unknown VLM backend '{backend}'{did_you_mean(backend, BACKENDS)}; "
                             f"choose one of {sorted(BACKENDS)}")
        if kernels != "auto":
            opts["kernels"] = kernels
        return cls(BACKENDS[backend](model, device=device, dtype=dtype, **opts))

    @property
    def model_id(self) -> str:
        return self.backend.model_id

    @property
    def kv_cache(self) -> Any:
        return getattr(self.backend, "kv_cache", None)

    @property
    def vision_tower_calls(self) -> int | None:
        return getattr(self.backend, "vision_tower_calls", None)

    @property
    def vision_images_encoded(self) -> int | None:
        """Images run through the vision tower so far (None where the backend cannot tell)."""
        return getattr(self.backend, "vision_images_encoded", None)

    def generate(self, images: Any, question: str, max_new_tokens: int = 64,
                 reduction: ReductionConfig | None = None, system_prompt: str | None = None) -> VLMResult:
        """Answer `question` about `images` greedily; the result carries text, tokens and the bill."""
        return self.backend.generate(images, question, max_new_tokens=max_new_tokens,
                                     reduction=reduction, system_prompt=system_prompt)

    def generate_batch(self, requests: Sequence[tuple[Any, str]], max_new_tokens: int = 64,
                       reduction: ReductionConfig | None = None,
                       system_prompt: str | None = None) -> list[VLMResult]:
        """Answer (images, question) requests together, one result per request in order.

        The transformers backend batches the prefills (left padding + attention mask), decodes
        greedily in lockstep and encodes each distinct image of the batch once; it bypasses the
        KV prefix cache (`TransformersBackend.generate_batch`). Backends without batching (the
        openai one: the server batches on its own) answer the requests one by one."""
        batch = getattr(self.backend, "generate_batch", None)
        if batch is not None:
            return batch(requests, max_new_tokens=max_new_tokens, reduction=reduction,
                          system_prompt=system_prompt)
        return [self.generate(images, question, max_new_tokens, reduction, system_prompt)
                for images, question in requests]

    def session(self, images: Any, system_prompt: str | None = None,
                reduction: ReductionConfig | None = None, max_new_tokens: int = 64) -> Any:
        """Multi-turn conversation over fixed media: `.ask(question) -> VLMResult`."""
        return self.backend.session(images, system_prompt=system_prompt, reduction=reduction,
                                    max_new_tokens=max_new_tokens)
