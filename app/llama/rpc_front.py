"""The worker's public port: TLS and the key in front of llama.cpp's server on loopback.

Each connection gets its own thread and AUTH_TIMEOUT_S in all to finish TLS and the key
challenge (app/llama/rpc_auth.py), however slowly its bytes drip in, so a stranger who connects
and goes silent holds up nobody. At most MAX_PENDING connections are that far at once, and
MAX_PENDING_PER_PEER from one source (an IPv4 address, an IPv6 /64), so one machine's flood
does not turn the others away. Only a client that proved the key is connected through to
llama.cpp's server (app/llama/rpc_server_process.py); until then llama.cpp has not seen a byte.

One client at a time: llama.cpp's server serves one connection and queues the rest, which
would leave a second user waiting without a word. Here a second client is told BUSY at once.
llama.cpp's client opens a new connection for each burst of use (registering, reading memory,
loading a model), so after a session ends the worker stays reserved for LEASE_S for the same
client id; another client that arrives meanwhile waits that moment out instead of slipping in
between.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable

from app.llama.rpc_auth import (
    BUSY,
    DOWN,
    MODE_CHECK,
    OK,
    Admitted,
    AuthError,
    TlsStream,
    admit,
    server_context,
)
from app.llama.rpc_identity import WorkerIdentity
from app.llama.rpc_keepalive import arm_socket
from app.llama.rpc_pump import pump
from app.llama.rpc_server_process import ServerProcess

AUTH_TIMEOUT_S = 10.0
LEASE_S = 3.0
BACKEND_WAIT_S = 30.0  # a client that arrives while llama.cpp's server restarts waits this long
MAX_PENDING = 64  # connections still in TLS or the key challenge; more are closed at once
MAX_PENDING_PER_PEER = 8
TURNED_AWAY_REPORT_S = 10.0  # one line per address this often, not one per connection
_ACCEPT_RETRY_S = 0.2


class Front:
    """Accepts on the public socket and admits one keyed client at a time."""

    def __init__(
        self,
        identity: WorkerIdentity,
        listener: socket.socket,
        backend: ServerProcess,
        report: Callable[[str], None],
    ) -> None:
        self._identity = identity
        self._listener = listener
        self._backend = backend
        self._report = report
        self._context = server_context(identity.certificate_pem)
        self._pending = threading.BoundedSemaphore(MAX_PENDING)
        self._pending_by_peer: dict[str, int] = {}
        self._turned_away_said: dict[str, float] = {}
        self._peers = threading.Lock()
        self._state = threading.Condition()
        self._active: bytes | None = None
        self._lease: tuple[bytes, float] | None = None  # (client id, until)

    def serve_forever(self) -> None:
        while True:
            try:
                conn, address = self._listener.accept()
            except OSError as exc:  # out of descriptors in a flood, or a client that gave up
                if self._listener.fileno() < 0:
                    return
                self._report(f"cannot accept a connection: {exc.strerror or exc}")
                time.sleep(_ACCEPT_RETRY_S)
                continue
            arm_socket(conn)  # a client machine that vanishes frees the worker (rpc_keepalive)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            peer = str(address[0])
            if not self._enter(_source(peer)):
                conn.close()
                continue
            threading.Thread(
                target=self._handle, args=(conn, peer), name="rpc-front", daemon=True
            ).start()

    def _enter(self, peer: str) -> bool:
        """Count a connection in until it is admitted or refused; False: turned away."""
        with self._peers:
            mine = self._pending_by_peer.get(peer, 0)
            if mine < MAX_PENDING_PER_PEER and self._pending.acquire(blocking=False):
                self._pending_by_peer[peer] = mine + 1
                return True
            now = time.monotonic()
            said = self._turned_away_said.get(peer)
            if said is not None and now - said < TURNED_AWAY_REPORT_S:
                return False
            # Sources said long enough ago are forgotten: a flood of addresses must not grow it.
            self._turned_away_said = {
                source: at
                for source, at in self._turned_away_said.items()
                if now - at < TURNED_AWAY_REPORT_S
            }
            self._turned_away_said[peer] = now
        self._report(f"turned away {peer}: too many connections still unfinished")
        return False

    def _leave(self, peer: str) -> None:
        with self._peers:
            left = self._pending_by_peer.pop(peer) - 1
            if left:
                self._pending_by_peer[peer] = left
        self._pending.release()

    def _handle(self, conn: socket.socket, peer: str) -> None:
        source = _source(peer)
        deadline = _Deadline(conn, AUTH_TIMEOUT_S)
        try:
            conn.settimeout(AUTH_TIMEOUT_S)
            stream = TlsStream(conn, self._context, server_side=True)
            admitted = admit(stream, self._identity.secret, self._identity.fingerprint)
            if not deadline.met():
                raise TimeoutError
        except AuthError as exc:
            deadline.met()
            self._report(f"refused {peer}: {exc}")
            conn.close()
            return
        except (OSError, ssl.SSLError):
            deadline.met()
            conn.close()  # a port scan, a reachability probe, or a client that gave up
            return
        finally:
            self._leave(source)
        with contextlib.closing(conn):
            self._serve(stream, admitted, peer)

    def _serve(self, stream: TlsStream, admitted: Admitted, peer: str) -> None:
        if admitted.mode == MODE_CHECK:
            with self._state:
                free = self._active is None
            with contextlib.suppress(OSError):
                stream.send((OK if free else BUSY) + b"\n")
            return
        if not self._claim(admitted.client_id, peer):
            with contextlib.suppress(OSError):
                stream.send(BUSY + b"\n")
            self._report(f"told {peer} the worker is busy")
            return
        try:
            try:
                backend = self._backend.connect(BACKEND_WAIT_S)
            except OSError:
                with contextlib.suppress(OSError):
                    stream.send(DOWN + b"\n")
                return
            try:
                stream.send(OK + b"\n")
            except OSError:
                backend.close()
                return
            stream.sock.settimeout(None)
            pump(backend, stream)
        finally:
            self._release(admitted.client_id)

    def _claim(self, client_id: bytes, peer: str) -> bool:
        with self._state:
            while True:
                if self._active is not None:
                    return False
                now, lease = time.monotonic(), self._lease
                if lease is None or now >= lease[1] or lease[0] == client_id:
                    if lease is None or now >= lease[1]:
                        # llama.cpp reconnects for every burst of use: one line per client.
                        self._report(f"serving {peer}")
                    self._active = client_id
                    return True
                self._state.wait(lease[1] - now)

    def _release(self, client_id: bytes) -> None:
        with self._state:
            self._active = None
            self._lease = (client_id, time.monotonic() + LEASE_S)
            self._state.notify_all()


class _Deadline:
    """Cuts a connection that has not finished TLS and the key by `seconds` after it came: a
    socket's timeout is per read, so a client dripping a byte at a time held its place for an
    hour."""

    def __init__(self, conn: socket.socket, seconds: float) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._settled = False  # met in time, or cut
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True
        self._timer.start()

    def _cut(self) -> None:
        with self._lock:
            if self._settled:
                return
            self._settled = True
        with contextlib.suppress(OSError):
            self._conn.shutdown(socket.SHUT_RDWR)

    def met(self) -> bool:
        """Stop the clock; False when it had already cut the connection."""
        self._timer.cancel()
        with self._lock:
            if self._settled:
                return False
            self._settled = True
            return True


def _source(peer: str) -> str:
    """What one machine's connections come from: its IPv4 address, or its IPv6 /64 (a host
    picks any address in its network's /64, so one address apiece would be no limit)."""
    try:
        address = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return peer
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)
