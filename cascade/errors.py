"""One error family for everything a user can get wrong, each naming the place and what was
expected."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class CascadeError(Exception):
    """Base class of every error vlm-cascade raises on purpose."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A difflib suggestion suffix (" (did you mean 'x'?)") or an empty string."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


class SpecError(CascadeError):
    """A pipeline definition is wrong: names the file, line, YAML path and what was expected."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        path: str | None = None,
        line: int | None = None,
    ):
        self.file, self.path, self.line, self.detail = file, path, line, message
        where = ":".join(str(p) for p in (file, line) if p is not None)
        prefix = ": ".join(p for p in (where, path) if p)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class ConnectError(SpecError):
    """Two stage ports cannot be connected (type mismatch or an unknown port)."""


class RegistryError(CascadeError):
    """A stage type is registered twice, or an unknown type was asked for."""


class InputError(CascadeError):
    """Bad user input (missing file, corrupt media, wrong value) outside a pipeline stage."""


class StageError(CascadeError):
    """A stage failed while running: names the stage, its type, and the cause."""

    def __init__(self, stage: str, stage_type: str, cause: BaseException | str):
        self.stage, self.stage_type = stage, stage_type
        self.cause = cause if isinstance(cause, BaseException) else None
        reason = str(cause) if str(cause) else type(cause).__name__
        if isinstance(cause, BaseException) and not isinstance(cause, CascadeError):
            reason = f"{type(cause).__name__}: {reason}"
        super().__init__(f"stage '{stage}' ({stage_type}) failed: {reason}")
