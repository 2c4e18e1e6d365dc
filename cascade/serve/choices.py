"""An answer as OpenAI `choices`: its n completions, each with its finish reason and logprobs.

A VLM answer carries its completions (`Answer.completions`: n of them when the request's sampling
asked for n, one else). A tool answer (OCR read the total; no VLM decode) has none: its text is
every choice, so a request for n = 3 gets three identical choices, each `finish_reason` "stop";
with `logprobs: true` their `logprobs` is `{"content": null}` (no token was sampled, so there are
no log-probabilities to report).
"""

from __future__ import annotations

from typing import Any

from ..artifacts import Answer
from ..decoding import Completion

__all__ = ["completions_of", "logprobs_body", "message_choices"]


def completions_of(answer: Answer, n: int) -> list[Completion]:
    """The answer's completions; a tool answer's text n times."""
    if answer.completions:
        return list(answer.completions)
    return [Completion(answer.text, answer.bill.finish_reason)] * n


def logprobs_body(completion: Completion, asked: bool) -> dict[str, Any] | None:
    """A choice's `logprobs`: None unless asked; `content` null where no token was sampled."""
    if not asked:
        return None
    entries = completion.logprobs
    return {"content": None if entries is None else [e.to_openai() for e in entries]}


def message_choices(answer: Answer, n: int, logprobs: bool) -> list[dict[str, Any]]:
    """The `choices` of a (non-streamed) chat completion."""
    return [
        {
            "index": i,
            "message": {"role": "assistant", "content": c.text},
            "logprobs": logprobs_body(c, logprobs),
            "finish_reason": c.finish_reason,
        }
        for i, c in enumerate(completions_of(answer, n))
    ]
