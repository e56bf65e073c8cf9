"""Refuses requests that a web page makes behind its user's back.

DNS rebinding: a page on evil.example points its name at 127.0.0.1, and the browser then sends
the page's requests here with `Host: evil.example`. So the Host must be a loopback name, the
address the server is bound to, or a name it was told to accept.

Cross-origin: a browser names the calling page in `Origin`. A request from an origin outside
the server's CORS list is refused whatever it asks: a "simple" request needs no preflight, so
CORS alone would hide its answer but still run it.

Clients that are not browsers send no Origin and the Host they were given, so both pass.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from app.server.errors import ApiError, error_response

# Host names that always reach this machine's own loopback interface.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})
ANY = "*"
# Enough of a refused name to recognise it in the error, not a whole hostile header.
_SHOWN_CHARS = 100


def host_name(address: str) -> str:
    """An address as a Host header writes it: lower case, an IPv6 address in brackets."""
    address = address.strip().lower()
    if ":" in address and not address.startswith("["):
        return f"[{address}]"
    return address


def _name_in(host_header: str) -> str:
    """The name a Host header holds, without its port."""
    value = host_header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[: end + 1] if end >= 0 else value
    return value.partition(":")[0]


class RequestGuard:
    """ASGI middleware: 403 for a foreign Host or an Origin outside `origins`."""

    def __init__(self, app: ASGIApp, hosts: Iterable[str], origins: Iterable[str]) -> None:
        self._app = app
        extra = {host_name(h) for h in hosts}
        self._hosts = None if ANY in extra else LOOPBACK_HOSTS | extra
        allowed = set(origins)
        self._origins = None if ANY in allowed else allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            error = self._refusal(scope["headers"])
            if error is not None:
                await error_response(error)(scope, receive, send)
                return
        await self._app(scope, receive, send)

    def _refusal(self, headers: list[tuple[bytes, bytes]]) -> ApiError | None:
        for key, raw in headers:
            value = raw.decode("latin-1")
            if key == b"host" and self._hosts is not None:
                name = _name_in(value)
                if name not in self._hosts:
                    return _refused_host(name[:_SHOWN_CHARS])
            elif key == b"origin" and self._origins is not None and value not in self._origins:
                return _refused_origin(value[:_SHOWN_CHARS])
        return None


def _refused_host(name: str) -> ApiError:
    message = (
        f"requests addressed to '{name}' are refused: it is not a name of this server, and "
        f"answering it would let web pages reach the server by DNS rebinding "
        f"(`specchat serve --allow-host {name}` accepts it)"
    )
    return ApiError(403, message, code="host_not_allowed")


def _refused_origin(origin: str) -> ApiError:
    message = (
        f"pages from '{origin}' may not call this server "
        f"(`specchat serve --cors-origin {origin}` allows them)"
    )
    return ApiError(403, message, code="origin_not_allowed")
