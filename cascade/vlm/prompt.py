"""Where the images, the conversation and the question go in a model's chat template.

The template is rendered with sentinel questions and answers, then cut at the first question: the
*prefix* (system prompt and the first user turn up to its text, i.e. the images) depends only on
the media and the system prompt, which is what the KV prefix cache keys on; the *suffix* holds the
earlier turns (`history`: (question, answer) pairs), the question and the assistant header. So a
served conversation, which resends its history on every request, still reuses its media prefix.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..errors import CascadeError, InputError

__all__ = ["PromptLayout", "History"]

History = Sequence[tuple[str, str]]

# Private-use characters: no template escapes them and no question contains them.
_Q, _A = "\ue000Q{}\ue000", "\ue000A{}\ue000"
_SENTINEL = re.compile("\ue000([QA])(\\d+)\ue000")


class PromptLayout:
    """The prompt text of a processor's chat template, split around the question."""

    def __init__(self, processor: Any):
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.placeholders = [
            t for t in (processor.image_token, getattr(processor, "video_token", None)) if t
        ]

    def render(self, n_images: int, system_prompt: str | None, n_turns: int) -> str:
        """The chat template with sentinel questions/answers, n_turns user turns (images in the
        first), ending with the generation prompt."""
        msgs: list[dict] = []
        if system_prompt is not None:
            msgs.append({"role": "system", "content": [{"type": "text", "text": system_prompt}]})
        for t in range(n_turns):
            content = [{"type": "image"}] * (n_images if t == 0 else 0)
            msgs.append(
                {"role": "user", "content": content + [{"type": "text", "text": _Q.format(t)}]}
            )
            if t < n_turns - 1:
                msgs.append(
                    {"role": "assistant", "content": [{"type": "text", "text": _A.format(t)}]}
                )
        return self.processor.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)

    def first_turn(
        self, n_images: int, system_prompt: str | None, question: str, history: History = ()
    ) -> tuple[str, str]:
        """(prefix, suffix): the prefix is everything before the first question (system prompt,
        images); the suffix the earlier turns, `question` and the assistant header."""
        history = self.check_history(history)
        text = self.render(n_images, system_prompt, len(history) + 1)
        prefix, _, rest = text.partition(_Q.format(0))
        if self.processor.image_token not in prefix and n_images:
            raise CascadeError(
                "this chat template puts the question before the images; the "
                "visual prefix cannot be separated from the question"
            )
        texts = {"Q": [q for q, _ in history] + [question], "A": [a for _, a in history]}
        # One pass, so a question or answer that happens to contain a sentinel stays as written.
        return prefix, _SENTINEL.sub(lambda m: texts[m[1]][int(m[2])], _Q.format(0) + rest)

    def next_turn(self, n_images: int, system_prompt: str | None, turn: int, question: str) -> str:
        """Text that follows answer `turn - 1` and asks `question` (turn counts from 0)."""
        text = self.render(n_images, system_prompt, turn + 1)
        after = text.split(_A.format(turn - 1), 1)[1]
        return after.replace(_Q.format(turn), question)

    def tokenize(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def check_question(self, question: Any, what: str = "the question") -> str:
        if not isinstance(question, str) or not question.strip():
            raise InputError(f"{what} must be a non-empty string, got {question!r}")
        for tok in self.placeholders:
            if tok in question:
                raise InputError(
                    f"{what} contains the placeholder '{tok}'; pass images as "
                    "`images`, the runtime inserts their placeholders"
                )
        return question

    def check_history(self, history: History) -> list[tuple[str, str]]:
        """Earlier (question, answer) turns; answers may be empty, questions may not."""
        if isinstance(history, (str, bytes)) or not isinstance(history, Sequence):
            raise InputError("history must be a list of (question, answer) pairs")
        out = []
        for i, turn in enumerate(history):
            if (
                not isinstance(turn, (tuple, list))
                or len(turn) != 2
                or not isinstance(turn[1], str)
            ):
                raise InputError(
                    f"history[{i}]: expected a (question, answer) pair of strings, got {turn!r:.80}"
                )
            out.append((self.check_question(turn[0], f"history[{i}]'s question"), turn[1]))
        return out
