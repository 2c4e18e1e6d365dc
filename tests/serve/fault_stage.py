"""Fault-injection stages for the server tests (registered as `test_fault` and `test_vlm_fault`).

Not stand-ins for any of our components:
- `test_fault` sits in front of the real `vlm_answer` in the test pipelines and passes the
  question through unchanged, unless the question asks for a fault: `SLEEP <seconds> ...` sleeps
  first (timeout and busy tests), `CRASH ...` raises like a stage bug.
- `test_vlm_fault` IS the real `vlm_answer` (a subclass that adds nothing else); a question
  `FAIL_AFTER <n> ...` makes its decode raise after n tokens, from inside the token loop, where a
  device error between two tokens would surface.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from cascade.artifacts import Image
from cascade.registry import get_stage_class
from cascade.stage import Serving, Stage, stage
from cascade.streaming import answer_stream, claim_stream


@stage("test_fault")
class FaultInjection(Stage):
    """Question in, same question out; `SLEEP n` delays, `CRASH` raises."""

    # On Ray, a deployment of its own (a replica can be killed while a request is surely in it).
    serving = Serving(heavy=True, num_cpus=0.25)

    @dataclass(frozen=True)
    class Outputs:
        question: str

    def run(self, question: str) -> Outputs:
        if question.startswith("SLEEP "):
            time.sleep(float(question.split()[1]))
        if question.startswith("CRASH"):
            raise RuntimeError("test_fault: crash injected by the question")
        return self.Outputs(question)


VLMAnswer = get_stage_class("vlm_answer")


@stage("test_vlm_fault")
class FailingDecode(VLMAnswer):
    """`vlm_answer`, whose decode fails after n tokens when the question says `FAIL_AFTER n`."""

    def run(
        self,
        images: list[Image] | Image,
        question: str,
        hint: str | None = None,
        max_new_tokens: int | None = None,
        history: list[tuple[str, str]] | None = None,
    ) -> VLMAnswer.Outputs:
        if not question.startswith("FAIL_AFTER "):
            return super().run(images, question, hint, max_new_tokens, history)
        limit, caller, seen = int(question.split()[1]), claim_stream(self.name), [0]

        def token(event) -> None:
            if caller is not None:
                caller(event)
            seen[0] += 1
            if seen[0] >= limit:
                raise RuntimeError(f"test_vlm_fault: the decode failed after {limit} tokens")

        with answer_stream(token):  # the VLM below claims this stream instead of the caller's
            return super().run(images, question, hint, max_new_tokens, history)
