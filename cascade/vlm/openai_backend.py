"""The scale-out backend: any OpenAI-compatible chat server (vLLM, SGLang, LMDeploy, ...), through
the `openai` SDK (its retries with backoff, timeouts and typed responses).

Images travel as base64 PNG data-URL parts of the first user message, before the question (the
layout the in-process backend uses, so a server's automatic prefix caching can reuse the visual
prefix across questions); earlier turns (`history`) follow as user/assistant messages.

The bill: the server's `usage` gives prompt and completion tokens. When the served model's family
is known (`config`: the checkpoint's hub id or folder; default: the model name, which is a hub id
for vLLM/SGLang), its visual tokens are counted locally with the family's own rule (or taken from
`usage.prompt_tokens_details.image_tokens` when the server reports them) and FLOPs are billed from
its shapes, as in process; without a family, visual tokens come from the server or are 0 and FLOPs
are 0. Requests ask for `logprobs`; when the server returns them the result's `confidence` is their
geometric-mean probability. With `on_token` the answer is streamed (`TokenEvent.token_id` is -1: a
server streams text, not ids).

Reduction, the KV prefix cache and sessions run inside the serving engine, not here: a reduction
other than `none` raises, and sessions are refused.
"""

from __future__ import annotations

import base64
import io
import math
import time
from collections.abc import Sequence
from typing import Any

from ..decoding import Completion, SamplingParams, TokenLogprob, sampling_params
from ..errors import CascadeError, InputError
from .billing import vlm_bill
from .decode import GREEDY, Generated, OnToken, TokenEvent
from .families import Family, ImageLimits, load_family
from .media import as_images
from .prompt import History
from .reduction import ReductionConfig
from .result import VLMResult

__all__ = ["OpenAIBackend", "image_data_url"]


def image_data_url(image: Any) -> str:
    """A PNG data URL of an `Image` (lossless, so the server sees exactly our pixels)."""
    buf = io.BytesIO()
    image.to_pil().save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


class OpenAIBackend:
    """model: the served model name. base_url: the server's /v1 root. config: hub id or folder of
    the served checkpoint, for its family (default: `model`; None or unloadable: no family, see the
    module docstring; "" tries the model name). timeout (seconds per request) and max_retries go to
    the SDK client; api_key defaults to the OPENAI_API_KEY environment variable, else a placeholder
    (local servers need
    none). client: an `openai.OpenAI` to use instead (tests)."""

    name = "openai"
    kv_cache = None
    vision_tower_calls = 0  # the tower runs on the server
    vision_images_encoded = 0

    def __init__(
        self,
        model: str,
        base_url: str = "http://127.0.0.1:8000/v1",
        api_key: str | None = None,
        timeout: float = 300.0,
        max_retries: int = 2,
        config: str | None = "",
        limits: ImageLimits | None = None,
        client: Any = None,
    ):
        import os

        import openai

        self.model_id, self.base_url = model, base_url.rstrip("/")
        self.family: Family | None = _family(model, config, limits)
        self._client = client or openai.OpenAI(
            base_url=self.base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "none",
            timeout=timeout,
            max_retries=max_retries,
        )

    def messages(
        self, images: list, question: str, system_prompt: str | None, history: History = ()
    ) -> list[dict]:
        parts: list[dict] = [
            {"type": "image_url", "image_url": {"url": image_data_url(im)}} for im in images
        ]
        turns = [*history, (question, None)]
        msgs: list[dict[str, Any]] = (
            [{"role": "system", "content": system_prompt}] if system_prompt is not None else []
        )
        for i, (q, a) in enumerate(turns):
            msgs.append(
                {
                    "role": "user",
                    "content": (parts if i == 0 else []) + [{"type": "text", "text": q}],
                }
            )
            if a is not None:
                msgs.append({"role": "assistant", "content": a})
        return msgs

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
    ) -> VLMResult:
        """One completion from the server, every sampling field sent as the server takes it
        (vLLM's extensions in `extra_body`); n > 1 is refused (ask n times)."""
        import openai

        sampling = sampling_params(sampling)
        if sampling.n > 1:
            raise InputError(
                f"sampling.n = {sampling.n}: the openai backend asks for one completion per call"
            )

        images = as_images(images)
        if not images:
            raise InputError("no image given: this VLM call needs at least one image")
        if not isinstance(question, str) or not question.strip():
            raise InputError(f"the question must be a non-empty string, got {question!r}")
        red = reduction or ReductionConfig()
        if not red.is_identity:
            raise InputError(
                f"the openai backend cannot apply reduction '{red.method}': token "
                "pruning runs inside the serving engine; configure it there"
            )
        body: dict[str, Any] = dict(
            model=self.model_id,
            max_tokens=sampling.max_tokens or max_new_tokens,
            logprobs=True,
            messages=self.messages(images, question, system_prompt, history),
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            presence_penalty=sampling.presence_penalty,
            frequency_penalty=sampling.frequency_penalty,
        )
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if sampling.top_logprobs:
            body["top_logprobs"] = sampling.top_logprobs
        fmt = sampling.response_format
        if fmt is not None:  # the server enforces it (vLLM: its own xgrammar backend)
            body["response_format"] = (
                {"type": "json_object"}
                if fmt.type == "json_object"
                else {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": fmt.schema},
                }
            )
        extra = {
            k: v
            for k, v, off in (  # vLLM / SGLang's extensions, sent when set
                ("top_k", sampling.top_k, 0),
                ("min_p", sampling.min_p, 0),
                ("repetition_penalty", sampling.repetition_penalty, 1),
                ("stop_token_ids", list(sampling.stop_token_ids), []),
            )
            if v != off and v != -1
        }
        if extra:
            body["extra_body"] = extra
        t0 = time.perf_counter()
        try:
            if on_token is None:
                text, usage, gen = self._complete(body, t0)
            else:
                text, usage, gen = self._stream(body, t0, on_token)
        except openai.APIStatusError as e:
            raise CascadeError(
                f"VLM server at {self.base_url} answered {e.status_code}: {str(e.message)[:500]}"
            ) from e
        except openai.APIError as e:  # connection refused, timeout after retries, bad response
            raise CascadeError(f"VLM server at {self.base_url} unreachable: {e}") from e
        return self._result(images, text, usage, gen, t0, sampling.logprobs)

    def _complete(self, body: dict, t0: float) -> tuple[str, Any, Generated]:
        resp = self._client.chat.completions.create(**body)
        choice = resp.choices[0]
        gen = Generated(finish="length" if choice.finish_reason == "length" else "stop")
        # Without streaming the first token is only seen with the last: ttft is an upper bound.
        gen.t_first = gen.t_end = time.perf_counter()
        _add_logprobs(gen, choice.logprobs)
        return choice.message.content or "", resp.usage, gen

    def _stream(self, body: dict, t0: float, on_token: OnToken) -> tuple[str, Any, Generated]:
        gen, text, usage = Generated(), [], None
        for chunk in self._client.chat.completions.create(
            **body, stream=True, stream_options={"include_usage": True}
        ):
            usage = chunk.usage or usage
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            delta = choice.delta.content or ""
            if delta and not gen.t_first:
                gen.t_first = time.perf_counter()
            n = len(gen.logprobs)
            _add_logprobs(gen, choice.logprobs)
            if delta:
                text.append(delta)
                lp = gen.logprobs[n] if len(gen.logprobs) > n else math.nan
                on_token(TokenEvent(0, len(text) - 1, -1, delta, lp))
            if choice.finish_reason:
                gen.finish = "length" if choice.finish_reason == "length" else "stop"
        gen.t_end = time.perf_counter()
        gen.t_first = gen.t_first or gen.t_end
        return "".join(text), usage, gen

    def _result(
        self, images: list, text: str, usage: Any, gen: Generated, t0: float, with_logprobs: bool
    ) -> VLMResult:
        n_in, n_out = (usage.prompt_tokens, usage.completion_tokens) if usage else (0, 0)
        details = usage.prompt_tokens_details if usage else None
        reported = details.image_tokens if details else None
        gen.tokens = [-1] * max(n_out, len(gen.logprobs))  # the server sends text, not ids
        fam = self.family
        red = ReductionConfig()
        if fam is None:
            n_vis = int(reported or 0)
            bill = _bill_without_family(self.model_id, n_vis, n_in - n_vis, gen, t0, red)
        else:
            costs = [fam.image_cost(im.width, im.height) for im in images]
            n_vis = int(reported) if reported is not None else sum(c.tokens for c in costs)
            bill = vlm_bill(
                fam,
                self.model_id,
                costs=costs,
                visual_tokens=n_vis,
                prompt_tokens=max(n_in - n_vis, 0),
                generated=gen,
                cache="off",
                reduction=red,
                t0=t0,
                vision_s=0.0,
                prefill_s=0.0,
            )
        entries = tuple(gen.entries) if with_logprobs else None
        return VLMResult(
            text=text,
            token_ids=(),
            model=self.model_id,
            backend=self.name,
            bill=bill,
            logprobs=tuple(gen.logprobs),
            top_logprobs=tuple(gen.top_logprobs),
            completions=(Completion(text, gen.finish, (), entries),),
        )

    def generate_batch(
        self,
        requests: Sequence[tuple[Any, str]],
        *,
        max_new_tokens: int = 64,
        reduction: ReductionConfig | None = None,
        system_prompt: str | None = None,
        sampling: SamplingParams = GREEDY,
    ) -> list[VLMResult]:
        """One request after the other: the server batches concurrent requests on its own."""
        return [
            self.generate(
                images,
                question,
                max_new_tokens=max_new_tokens,
                reduction=reduction,
                system_prompt=system_prompt,
                sampling=sampling,
            )
            for images, question in requests
        ]

    def session(self, images: Any, **_: Any) -> Any:
        raise CascadeError(
            "sessions need the transformers backend; against a server, send each "
            "question with the same images (and the earlier turns as `history`) "
            "and let its prefix caching reuse them"
        )

    def close(self) -> None:
        self._client.close()


def _family(model: str, config: str | None, limits: ImageLimits | None) -> Family | None:
    """The served model's family: from `config` (must load), else from the model name when it is
    a loadable checkpoint (a hub id, as vLLM names models), else None (config=None: never)."""
    if config:
        return load_family(config, limits)
    if config is None:
        return None
    try:
        return load_family(model, limits)
    except CascadeError:
        return None


def _add_logprobs(gen: Generated, logprobs: Any) -> None:
    for item in getattr(logprobs, "content", None) or []:
        if isinstance(item.logprob, (int, float)):
            gen.logprobs.append(float(item.logprob))
            top = item.top_logprobs or ()
            gen.top_logprobs.append(tuple((-1, float(t.logprob)) for t in top))
            gen.entries.append(
                TokenLogprob(
                    item.token,
                    float(item.logprob),
                    tuple(item.bytes or ()),
                    tuple(
                        TokenLogprob(t.token, float(t.logprob), tuple(t.bytes or ())) for t in top
                    ),
                )
            )


def _bill_without_family(
    model: str, visual: int, text: int, gen: Generated, t0: float, red: ReductionConfig
):
    from ..bill import Bill
    from .result import geometric_confidence

    return Bill(
        model=model,
        visual_tokens=visual,
        unreduced_visual_tokens=visual,
        prompt_tokens=text,
        generated_tokens=len(gen.tokens),
        finish_reason=gen.finish,
        ttft_s=gen.t_first - t0,
        total_s=(gen.t_end or gen.t_first) - t0,
        images_encoded=0,
        cache="off",
        confidence=geometric_confidence(gen.logprobs),
    )
