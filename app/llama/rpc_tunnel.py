"""The client's end of the encrypted path: a loopback port that llama.cpp's RPC client dials.

llama.cpp's RPC client speaks plain TCP and nothing else, so each keyed worker gets a listener
on 127.0.0.1 in the process that registers it; llama.cpp is handed that address instead of the
worker's. Every connection llama.cpp opens there (it opens one per burst of use, one at a time)
becomes a fresh TLS connection to the worker that proves the key (app/llama/rpc_auth.py), and
a thread forwards the bytes (app/llama/rpc_pump.py). When the worker refuses or vanishes the
loopback connection is closed, which llama.cpp treats like a worker that died.

On Linux the listener only serves connections opened by this very process: another program
on this machine cannot ride the authenticated tunnel. The client id lets the worker keep itself
free for this process between llama.cpp's connections.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from pathlib import Path

from app.errors import RpcConnectError
from app.llama.rpc_auth import MODE_SESSION, new_client_id, open_stream
from app.llama.rpc_pump import pump
from app.llama.rpc_token import WorkerToken

CONNECT_TIMEOUT_S = 4.0
# Starts the line a refused tunnel leaves in the log of the process llama.cpp then ends.
REFUSED_MARKER = "specchat rpc tunnel:"
_LOOPBACK = "127.0.0.1"

_lock = threading.Lock()
_tunnels: dict[str, Tunnel] = {}


def _tcp_hex(host: str, port: int) -> str:
    return f"{socket.inet_aton(host)[::-1].hex().upper()}:{port:04X}"


def opened_by_this_process(conn: socket.socket) -> bool:
    """Whether the peer of an accepted loopback connection is a socket of this process."""
    table = Path("/proc/net/tcp")
    if not table.exists():
        return True  # no way to ask on this system; the port is loopback-only either way
    peer = _tcp_hex(*conn.getpeername()[:2])
    ours = _tcp_hex(*conn.getsockname()[:2])
    inodes = {
        fields[9]
        for fields in (line.split() for line in table.read_text().splitlines()[1:])
        if fields[1] == peer and fields[2] == ours
    }
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/self/fd/{name}")
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    return True
    return False


class Tunnel:
    """A loopback listener forwarding each accepted connection to one worker over TLS."""

    def __init__(self, endpoint: str, token: WorkerToken) -> None:
        self.endpoint = endpoint
        self._token = token
        self._client_id = new_client_id()
        self._listener = socket.create_server((_LOOPBACK, 0))
        self.local_endpoint = f"{_LOOPBACK}:{self._listener.getsockname()[1]}"
        thread = threading.Thread(target=self._accept_loop, name="rpc-tunnel", daemon=True)
        thread.start()

    def _accept_loop(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            if not opened_by_this_process(conn):
                conn.close()
                continue
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(
                target=self._forward, args=(conn,), name="rpc-tunnel-pump", daemon=True
            ).start()

    def _forward(self, conn: socket.socket) -> None:
        try:
            stream = open_stream(
                self.endpoint, self._token, MODE_SESSION, self._client_id, CONNECT_TIMEOUT_S
            )
        except RpcConnectError as exc:
            # llama.cpp sees a closed connection and ends this process; this line in its log
            # says why.
            print(f"{REFUSED_MARKER} {exc.endpoint} {exc.reason}", file=sys.stderr, flush=True)
            conn.close()
            return
        stream.sock.settimeout(None)
        pump(conn, stream)


def tunnel_to(endpoint: str, token: WorkerToken) -> str:
    """The loopback endpoint to give llama.cpp for a keyed worker (one tunnel per worker)."""
    with _lock:
        tunnel = _tunnels.get(endpoint)
        if tunnel is None:
            tunnel = _tunnels[endpoint] = Tunnel(endpoint, token)
        return tunnel.local_endpoint


def public_endpoint(native: str) -> str:
    """The worker's own address for a tunnel's loopback endpoint; other endpoints unchanged."""
    with _lock:
        for tunnel in _tunnels.values():
            if tunnel.local_endpoint == native:
                return tunnel.endpoint
    return native
