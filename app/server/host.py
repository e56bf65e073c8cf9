"""Where the server listens and how uvicorn runs it: in the foreground for `specchat serve`,
on a background thread for the window's Local server switch."""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable
from typing import Any

from app.errors import InvalidSettingError
from app.server.limits import Limits

# Seconds in-flight replies get to finish on shutdown before the server stops them.
GRACEFUL_SHUTDOWN_S = 3


def listen(host: str, port: int) -> socket.socket:
    """Bind before loading models, so a taken port fails in a second, not after a load."""
    if not 0 <= port <= 65535:
        raise InvalidSettingError(f"the port must be between 0 and 65535, got {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise InvalidSettingError(f"cannot listen on {host}: {exc.strerror}") from None
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise InvalidSettingError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return sock


def exposure_warning(host: str, address: str, *, keyed: bool) -> str | None:
    """One line for a bind other machines can reach; None for a loopback address."""
    if is_loopback(address):
        return None
    reach = f"warning: listening on {host}: other machines on the network can reach the models"
    if not keyed:
        reach += "; no API key is required (--api-key)"
    if _is_unspecified(address):
        # Requests must name the server by a name it knows (app.server.guard).
        reach += "; give the name other machines use for it with --allow-host NAME"
    return reach


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", maxsplit=1)[0]).is_loopback
    except ValueError:
        return False


def _is_unspecified(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_unspecified
    except ValueError:
        return False


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/v1"


def make_server(app: Any, on_shutdown: Callable[[], None], limits: Limits | None = None) -> Any:
    """A uvicorn server for `app` that stops the replies in flight first when it shuts down:
    they then end within a round, well inside the graceful timeout. limits: the connection
    limits (app.server.protocol); None for the defaults."""
    import uvicorn  # noqa: PLC0415 - the web stack loads only when serving

    from app.server.protocol import guarded_protocol  # noqa: PLC0415

    limits = limits or Limits()

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            on_shutdown()
            await super().shutdown(sockets)

    config = uvicorn.Config(
        app,
        http=guarded_protocol(limits.header_timeout_s, limits.max_connections),
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    return Server(config)


class BackgroundServer:
    """uvicorn on its own thread (uvicorn installs no signal handlers off the main thread)."""

    def __init__(
        self,
        app: Any,
        sock: socket.socket,
        on_shutdown: Callable[[], None],
        limits: Limits | None = None,
    ) -> None:
        self.url = url_of(sock)
        self._sock = sock
        self._server = make_server(app, on_shutdown, limits)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="local-server", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float = GRACEFUL_SHUTDOWN_S + 2) -> bool:
        """Ask uvicorn to finish and wait for it; True if it ended in time."""
        self._server.should_exit = True
        self._thread.join(timeout_s)
        self._sock.close()
        return not self._thread.is_alive()
