"""HTTP errors with OpenAI-style JSON bodies: `{"error": {"message", "type", "param", "code"}}`.

Every refusal the server makes goes through `APIError`, so clients (the official `openai` package
included) see the status and a message that says what to change, never a traceback.
"""

from __future__ import annotations

from typing import Any

_TYPES = {
    400: "invalid_request_error",
    404: "not_found_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    499: "client_closed_request",
    500: "server_error",
    503: "server_error",
    504: "timeout_error",
}


class APIError(Exception):
    """A request the server refuses or could not finish; `status` is the HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        type: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param
        self.type = type or _TYPES.get(status, "invalid_request_error")
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.param, self.code)


def _text(s: str | None) -> str | None:
    # A client's lone surrogate echoed into a message must not make the error itself a 500.
    return None if s is None else s.encode("utf-8", "backslashreplace").decode("utf-8")


def error_body(
    message: str, type: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": _text(message), "type": type, "param": _text(param), "code": code}}
