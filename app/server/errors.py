"""Errors the HTTP API returns, in OpenAI's JSON shape: {"error": {message, type, param, code}}."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from app.errors import SpecChatError, user_message

if TYPE_CHECKING:
    from starlette.responses import JSONResponse


class ApiError(Exception):
    """A request the server refuses; `status` is the HTTP code, the rest goes to the client.

    headers go out with the response (Retry-After, or Connection: close when the connection
    cannot carry another request)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str,
        param: str | None = None,
        error_type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.error_type = error_type or _default_type(status)
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.error_type,
                "param": self.param,
                "code": self.code,
            }
        }


def error_response(error: ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    # The web stack loads only when serving; the CLI imports this module for every command.
    from starlette.responses import JSONResponse  # noqa: PLC0415

    return JSONResponse(
        error.body(), status_code=error.status, headers={**error.headers, **(headers or {})}
    )


def _default_type(status: int) -> str:
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    if status == 404:
        return "not_found_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def invalid(param: str, message: str, *, code: str = "invalid_value") -> ApiError:
    return ApiError(400, message, code=code, param=param)


def finite_number(value: object, param: str, name: str) -> float | None:
    """value as a float, None when absent; anything but a finite number (true and false
    included) is refused in words naming `name`, quoted as the client wrote it."""
    return None if value is None else finite(value, param, name)


def finite(value: object, param: str, name: str) -> float:
    """finite_number for a value that is there."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(param, f"{name} must be a number", code="invalid_type")
    try:
        number = float(value)
    except OverflowError:
        # JSON reads an integer literal as an int of any size (up to 4300 digits); past the
        # float range it is as unusable as 1e400, which reads as inf.
        number = math.inf
    if not math.isfinite(number):
        raise invalid(param, f"{name} must be a finite number")
    return number


def refused(
    exc: SpecChatError,
    status: int = 400,
    *,
    code: str = "invalid_value",
    error_type: str | None = None,
    param: str | None = None,
) -> ApiError:
    """The answer to a user error: user_message's words, as the CLI and the window say it."""
    return ApiError(status, user_message(exc), code=code, error_type=error_type, param=param)
