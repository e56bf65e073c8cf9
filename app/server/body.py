"""Reading a completion request's body: JSON only, bounded in bytes and in time, and text
that can be encoded.

A web page can POST text/plain (or a typeless Blob) to any address without a CORS preflight,
so only `application/json` is read: that type makes a browser ask first, and the server's
CORS settings answer. JSON may spell a lone UTF-16 surrogate (`"\\ud800"`), which no UTF-8
tokenizer accepts; such a string is refused here, naming where it is.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from typing import Any

from starlette.requests import Request

from app.server.errors import ApiError, invalid

JSON_TYPE = "application/json"
# Only a \uD800-\uDFFF escape, or those code points' own bytes (json.loads lets them through),
# can put a surrogate in a string; a body with neither skips the walk over every string.
_MAYBE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


async def read_json(request: Request, max_bytes: int, timeout_s: float) -> Any:
    """The parsed body; ApiError for a refusal, starlette's ClientDisconnect if the client
    left before sending it all."""
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != JSON_TYPE:
        given = f"'{media_type}'" if media_type else "none"
        message = f"the request body must be JSON (Content-Type: {JSON_TYPE}); got {given}"
        raise ApiError(415, message, code="unsupported_media_type")
    too_big = ApiError(413, f"the request body is larger than {max_bytes} bytes", code="too_large")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise too_big
    body = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                body += chunk
                if len(body) > max_bytes:
                    raise too_big
    except TimeoutError:
        message = f"the request body did not arrive within {timeout_s:g} s"
        # The rest of the body may still come: the connection cannot carry another request.
        raise ApiError(408, message, code="timeout", headers={"Connection": "close"}) from None
    try:
        parsed = json.loads(bytes(body), parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        message = f"the request body is not valid JSON: {exc}"
        raise ApiError(400, message, code="invalid_json") from None
    where = lone_surrogate_at(parsed) if _MAYBE_SURROGATE.search(body) else None
    if where is not None:
        message = f"'{where}' holds a lone UTF-16 surrogate, which is not text"
        raise invalid(where, message)
    return parsed


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def lone_surrogate_at(value: Any) -> str | None:
    """The path (`messages[0].role`) of the first string, key or value, that UTF-8 cannot
    encode; None when there is none. Iterative: the body may nest as deep as JSON allows."""
    pending: deque[tuple[str, Any]] = deque([("", value)])
    while pending:
        path, item = pending.popleft()
        if isinstance(item, str):
            if not _encodable(item):
                return path or "body"
        elif isinstance(item, dict):
            for key, child in item.items():
                if not _encodable(key):
                    # The path goes back in the error's JSON, so the key is shown escaped.
                    return _join(path, key.encode("utf-8", "backslashreplace").decode())
                pending.append((_join(path, key), child))
        elif isinstance(item, list):
            pending.extend((f"{path}[{i}]", child) for i, child in enumerate(item))
    return None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
