"""uvicorn's HTTP/1.1 protocol (h11) with the two limits uvicorn lacks.

A deadline for each request head: uvicorn waits for a head as long as the client likes, so
clients that send half a request (or nothing) hold sockets and file descriptors for ever. The
head must arrive whole within `header_timeout_s` of the connection opening or of the previous
response ending; a body's own deadline is the completion handler's (app.server.body).

A cap on open connections: requests run one at a time, so more sockets serve no one. A
connection beyond the cap gets one JSON 503 and is closed.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.server.errors import ApiError, error_response

log = logging.getLogger(__name__)


def guarded_protocol(header_timeout_s: float, max_connections: int) -> type[H11Protocol]:
    """The protocol class for uvicorn.Config(http=...)."""

    async def refuse_busy(scope: Scope, receive: Receive, send: Send) -> None:
        error = ApiError(
            503,
            f"more than {max_connections} connections are open; retry later",
            code="too_many_connections",
            headers={"Connection": "close", "Retry-After": "1"},
        )
        await error_response(error)(scope, receive, send)

    class GuardedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        # The request cycle that was current when the wait for the next head began.
        _waiting_after: object = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                log.info("refusing a connection: %d are open", len(self.connections) - 1)
                self.app = refuse_busy
            self._await_head()

        def handle_events(self) -> None:
            super().handle_events()
            if self._head_timer is not None and self.cycle is not self._waiting_after:
                self._stop_waiting()  # a new request's head arrived

        def on_response_complete(self) -> None:
            # Armed first: a pipelined request that the base class starts disarms it.
            self._await_head()
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_waiting()
            super().connection_lost(exc)

        def _await_head(self) -> None:
            self._stop_waiting()
            self._waiting_after = self.cycle
            self._head_timer = self.loop.call_later(header_timeout_s, self._head_timed_out)

        def _stop_waiting(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
                log.debug("closing a connection: no request head within %g s", header_timeout_s)
                self.transport.close()

    return GuardedH11Protocol
