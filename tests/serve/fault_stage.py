"""A fault-injection stage for the server tests (registered as `test_fault`).

Not a stand-in for any of our components: it sits in front of the real `vlm_answer` in the test
pipelines and passes the question through unchanged, unless the question asks for a fault:
`SLEEP <seconds> ...` sleeps first (timeout and busy tests), `CRASH ...` raises like a stage bug.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from cascade.stage import Stage, stage


@stage("test_fault")
class FaultInjection(Stage):
    """Question in, same question out; `SLEEP n` delays, `CRASH` raises."""

    @dataclass(frozen=True)
    class Outputs:
        question: str

    def run(self, question: str) -> Outputs:
        if question.startswith("SLEEP "):
            time.sleep(float(question.split()[1]))
        if question.startswith("CRASH"):
            raise RuntimeError("test_fault: crash injected by the question")
        return self.Outputs(question)
