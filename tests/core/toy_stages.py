"""Small real stages used only by the core tests (registered under `test_*` names)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from pydantic import Field

from cascade.artifacts import Route
from cascade.stage import Router, Stage, StageParams, stage
from cascade.trace import record

# Two stages that must be running at the same time to get past this barrier.
OVERLAP = threading.Barrier(2, timeout=10)


@stage("test_add")
class Add(Stage):
    """Add a constant to a number."""

    class Params(StageParams):
        amount: int = Field(1, description="what to add")

    @dataclass(frozen=True)
    class Outputs:
        value: int

    def run(self, value: int) -> Outputs:
        record(additions=1)
        return self.Outputs(value + self.params.amount)


@stage("test_meet")
class Meet(Stage):
    """Wait at a barrier shared with another instance, proving both run concurrently."""

    @dataclass(frozen=True)
    class Outputs:
        value: int

    def run(self, value: int) -> Outputs:
        OVERLAP.wait()
        return self.Outputs(value)


@stage("test_sum")
class Sum(Stage):
    """Add two numbers."""

    @dataclass(frozen=True)
    class Outputs:
        value: int

    def run(self, a: int, b: int = 0) -> Outputs:
        return self.Outputs(a + b)


@stage("test_to_text")
class ToText(Stage):
    """Format a number as text."""

    @dataclass(frozen=True)
    class Outputs:
        text: str

    def run(self, value: int) -> Outputs:
        return self.Outputs(f"#{value}")


@stage("test_fail")
class Fail(Stage):
    """Always raises, to test how failures are reported."""

    @dataclass(frozen=True)
    class Outputs:
        value: int

    def run(self, value: int) -> Outputs:
        raise ZeroDivisionError(f"cannot divide {value} by zero")


@stage("test_sign_router")
class SignRouter(Router):
    """Route on the sign of a number; `force` picks an undeclared branch to test the check."""

    branches = ("negative", "positive")

    class Params(StageParams):
        force: str | None = None

    @dataclass(frozen=True)
    class Outputs:
        route: Route

    def run(self, value: int) -> Outputs:
        branch = self.params.force or ("negative" if value < 0 else "positive")
        return self.Outputs(Route(branch, f"value {value}", {"value": float(value)}))


# What a loading stage and a running one did, in order (the setup gate's test).
GATE_LOG: list[str] = []


@stage("test_loads")
class Loads(Stage):
    """A stage whose setup takes a while (a model load that changes process-wide state)."""

    @dataclass(frozen=True)
    class Outputs:
        value: int

    def setup(self) -> None:
        GATE_LOG.append("setup start")
        time.sleep(0.3)
        GATE_LOG.append("setup end")

    def run(self, value: int) -> Outputs:
        return self.Outputs(value)


@stage("test_busy")
class Busy(Stage):
    """A stage that runs for a while."""

    @dataclass(frozen=True)
    class Outputs:
        value: int

    def run(self, value: int) -> Outputs:
        GATE_LOG.append("run start")
        time.sleep(0.3)
        GATE_LOG.append("run end")
        return self.Outputs(value)
