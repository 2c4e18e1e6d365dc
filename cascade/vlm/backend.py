"""The backend protocol and the `VLM` facade users hold.

A backend answers a question about images and bills it (`VLMResult` with its `Bill`); it may also
open sessions and batch. Backends register by short name with their options
(`cascade.vlm.options.register_backend`); `VLM.load(model, backend="transformers")` picks one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from .. import plugins
from ..errors import InputError, did_you_mean
from ..streaming import TokenChannel
from .decode import GREEDY, OnToken, SamplingParams, TokenEvent
from .families import Family, ImageLimits
from .prompt import History
from .reduction import ReductionConfig
from .result import VLMResult

__all__ = ["Backend", "VLM", "Stream"]


@runtime_checkable
class Backend(Protocol):
    """What a backend provides. `family`: the model's family (None where it is not known, e.g. a
    served model without a local config); it prices images and FLOPs. kv_cache: the KV prefix
    cache (None when off or run by a server); the counters count vision-tower runs in this
    process."""

    name: str
    model_id: str

    # read-only to its users: a backend may keep them as attributes or compute them
    @property
    def family(self) -> Family | None: ...
    @property
    def kv_cache(self) -> Any: ...
    @property
    def vision_tower_calls(self) -> int: ...
    @property
    def vision_images_encoded(self) -> int: ...

    def generate(
        self,
        images: Any,
        question: str,
        *,
        max_new_tokens: int = 64,
        reduction: ReductionConfig | None = None,
        system_prompt: str | None = None,
        history: History = (),
        sampling: SamplingParams = GREEDY,
        on_token: OnToken | None = None,
    ) -> VLMResult: ...

    def generate_batch(
        self,
        requests: Sequence[tuple[Any, str]],
        *,
        max_new_tokens: int = 64,
        reduction: ReductionConfig | None = None,
        system_prompt: str | None = None,
        sampling: SamplingParams = GREEDY,
    ) -> list[VLMResult]: ...

    def session(
        self,
        images: Any,
        *,
        system_prompt: str | None = None,
        reduction: ReductionConfig | None = None,
        max_new_tokens: int = 64,
    ) -> Any: ...


class Stream:
    """Tokens of one `VLM.stream` call as they are generated; `result` once iteration ends.

    Generation runs in a worker thread; iterating yields `TokenEvent`s (token id, the text it
    adds, its log-probability) and re-raises the call's error, if any, at the end. The tokens
    cross threads through `cascade.streaming.TokenChannel`."""

    def __init__(self, call: Callable[[OnToken], VLMResult]):
        self._tokens = TokenChannel()
        self.result: VLMResult | None = None

        def work() -> None:
            error = None
            try:
                self.result = call(self._tokens.put)
            except BaseException as e:  # handed to the iterating thread
                error = e
            finally:
                self._tokens.close(error)

        self._thread = threading.Thread(target=work, daemon=True)
        self._thread.start()

    def __iter__(self) -> Iterator[TokenEvent]:
        yield from self._tokens
        self._thread.join()


class VLM:
    """A vision-language model behind any backend.

    >>> vlm = VLM.load("Qwen/Qwen2-VL-2B-Instruct", kv_cache_bytes=2 << 30)
    >>> r = vlm.generate([image], "What is on the sign?",
    ...                  reduction=ReductionConfig("divprune", 0.25))
    >>> r.text, r.bill.visual_tokens, r.bill.prefill_savings
    """

    def __init__(self, backend: Backend):
        self.backend = backend

    @classmethod
    def load(
        cls,
        model: str,
        backend: str = "transformers",
        device: str = "auto",
        dtype: Any = "auto",
        kernels: Literal["auto", "triton", "torch"] = "auto",
        resolution: Literal["default", "full"] = "default",
        min_pixels: int | None = None,
        max_pixels: int | None = None,
        longest_edge: int | None = None,
        **opts: Any,
    ) -> VLM:
        """model: hub id, local folder, or (openai) the served model name; resolution and
        min/max_pixels / longest_edge: the family's image limits (`ImageLimits`); opts go to the
        backend's loader (transformers: kv_cache_bytes, kv_int8, kv_cache, attn_implementation,
        context_window; openai: base_url, api_key, timeout, max_retries, config; a registered
        backend: its own).

        kernels (transformers backend): "auto" runs the cascade.kernels Triton ops on CUDA and
        their torch references on CPU; "triton" forces Triton (on CPU only under
        TRITON_INTERPRET=1); "torch" the references. Passed to the backend only when not "auto"."""
        entry = plugins.backends.get(backend)  # a `cascade.vlm.options.BackendEntry`
        if entry is None:
            names = plugins.backends.names()
            raise InputError(
                f"unknown VLM backend '{backend}'{did_you_mean(backend, names)}; "
                f"choose one of {names}"
            )
        if kernels != "auto":
            opts["kernels"] = kernels
        limits = ImageLimits(resolution, min_pixels, max_pixels, longest_edge)
        return cls(entry.loader(model, device=device, dtype=dtype, limits=limits, **opts))

    @property
    def model_id(self) -> str:
        return self.backend.model_id

    @property
    def family(self) -> Family | None:
        return self.backend.family

    @property
    def kv_cache(self) -> Any:
        return self.backend.kv_cache

    @property
    def vision_tower_calls(self) -> int:
        """Vision-tower runs in this process so far (0 for a served model)."""
        return self.backend.vision_tower_calls

    @property
    def vision_images_encoded(self) -> int:
        """Images run through the vision tower in this process so far."""
        return self.backend.vision_images_encoded

    def image_embeds(self, images: Any) -> list[Any]:
        """What the vision tower makes of each image, as `cascade.artifacts.ImageEmbeds` that
        `generate` takes in the images' place (`cascade embed`); a backend without a local
        tower raises InputError."""
        embed = getattr(self.backend, "image_embeds", None)
        if embed is None:
            raise InputError(
                f"the {type(self.backend).__name__} backend computes no image embeddings"
            )
        return embed(images)

    def generate(
        self,
        images: Any,
        question: str,
        max_new_tokens: int = 64,
        reduction: ReductionConfig | None = None,
        system_prompt: str | None = None,
        *,
        history: History = (),
        sampling: SamplingParams = GREEDY,
        on_token: OnToken | None = None,
    ) -> VLMResult:
        """Answer `question` about `images`; the result carries the text, the tokens with their
        log-probabilities, and the bill.

        history: earlier (question, answer) turns, placed after the images and before the
        question (the media prefix stays cacheable). sampling: greedy by default; a
        `cascade.decoding.SamplingParams` (or a mapping of its fields) sets temperature, top-p/k,
        min-p, penalties, a seed, stop strings / ids, logprobs and top_logprobs, and n
        completions from one prefill (`result.completions`). on_token: called with each
        `TokenEvent` as it is generated (see `stream` for an iterator)."""
        return self.backend.generate(
            images,
            question,
            max_new_tokens=max_new_tokens,
            reduction=reduction,
            system_prompt=system_prompt,
            history=history,
            sampling=sampling,
            on_token=on_token,
        )

    def stream(self, images: Any, question: str, max_new_tokens: int = 64, **kw: Any) -> Stream:
        """`generate` as an iterator of `TokenEvent`s; the `VLMResult` is `.result` afterwards.

        >>> s = vlm.stream([image], "Describe it.")
        >>> text = "".join(ev.text for ev in s); s.result.bill"""
        return Stream(
            lambda on_token: self.generate(
                images, question, max_new_tokens, on_token=on_token, **kw
            )
        )

    def generate_batch(
        self,
        requests: Sequence[tuple[Any, str]],
        max_new_tokens: int = 64,
        reduction: ReductionConfig | None = None,
        system_prompt: str | None = None,
        *,
        sampling: SamplingParams = GREEDY,
    ) -> list[VLMResult]:
        """Answer (images, question) requests together, one result per request in order.

        The transformers backend batches the prefills (left padding + attention mask), decodes in
        lockstep and encodes each distinct image of the batch once; it bypasses the KV prefix
        cache (`TransformersBackend.generate_batch`). The openai backend sends the requests one
        by one (the server batches on its own)."""
        return self.backend.generate_batch(
            requests,
            max_new_tokens=max_new_tokens,
            reduction=reduction,
            system_prompt=system_prompt,
            sampling=sampling,
        )

    def session(
        self,
        images: Any,
        system_prompt: str | None = None,
        reduction: ReductionConfig | None = None,
        max_new_tokens: int = 64,
    ) -> Any:
        """Multi-turn conversation over fixed media: `.ask(question) -> VLMResult`."""
        return self.backend.session(
            images, system_prompt=system_prompt, reduction=reduction, max_new_tokens=max_new_tokens
        )
