"""Notice a worker whose machine vanished: TCP keepalive on llama.cpp's RPC connections.

llama.cpp's RPC client waits on its sockets without any timeout, so a worker PC that loses
power or network mid-reply would leave the reply waiting for the operating system's default
(minutes to hours). The sockets are llama.cpp's, opened inside its calls (a model load opens
its own), so a thread in the process that owns them switches TCP keepalive on for every TCP
connection it sees: the kernel then probes an idle connection and drops it when the peer stops
answering, llama.cpp's wait fails, and the process ends as it does for a killed worker. A live
worker's kernel answers the probes even while it computes for minutes, so slowness is never
mistaken for death. Probing the worker's port from outside would be wrong: a worker serves
one client at a time and its listen backlog holds one more, so extra connections time out.

Linux only (it reads /proc/self/fd); elsewhere the thread is not started.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time

IDLE_S = 5  # quiet time before the first probe
INTERVAL_S = 2
PROBES = 3  # unanswered probes before the connection is dropped: ~11 s in all
UNACKED_LIMIT_S = 30  # data sent but unacknowledged this long (a load to a vanished worker)
SCAN_EVERY_S = 0.5

_FD_DIR = "/proc/self/fd"


def arm_socket(sock: socket.socket) -> None:
    """Keepalive probes on one TCP connection (the worker's front and the client's tunnel arm
    their own sockets as they open them)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", IDLE_S),
        ("TCP_KEEPINTVL", INTERVAL_S),
        ("TCP_KEEPCNT", PROBES),
        ("TCP_USER_TIMEOUT", UNACKED_LIMIT_S * 1000),
    ):
        option = getattr(socket, name, None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


def arm_tcp_connections(seen: set[str]) -> int:
    """Switch keepalive on for this process's connected TCP sockets not yet in `seen`."""
    armed = 0
    try:
        names = os.listdir(_FD_DIR)
    except OSError:
        return 0
    for name in names:
        with contextlib.suppress(OSError, ValueError):
            target = os.readlink(os.path.join(_FD_DIR, name))
            if not target.startswith("socket:") or target in seen:
                continue
            # A duplicate descriptor shares the socket; closing it leaves llama.cpp's open.
            with socket.socket(fileno=os.dup(int(name))) as sock:
                tcp = sock.family in (socket.AF_INET, socket.AF_INET6)
                if not tcp or sock.type != socket.SOCK_STREAM:
                    seen.add(target)
                    continue
                sock.getpeername()  # raises until it is connected: looked at again next scan
                arm_socket(sock)
                seen.add(target)
                armed += 1
    return armed


def start_keepalive_thread() -> threading.Thread | None:
    """Arm every TCP connection this process opens from now on; None where unsupported."""
    if not sys.platform.startswith("linux") or not os.path.isdir(_FD_DIR):
        return None
    seen: set[str] = set()

    def run() -> None:
        while True:
            arm_tcp_connections(seen)
            time.sleep(SCAN_EVERY_S)

    thread = threading.Thread(target=run, name="rpc-keepalive", daemon=True)
    thread.start()
    return thread
