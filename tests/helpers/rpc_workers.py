"""Workers for the RPC tests: `specchat worker` subprocesses and fake servers, all on 127.0.0.1."""

from __future__ import annotations

import contextlib
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Worker:
    endpoint: str
    process: subprocess.Popen[bytes]

    def cpu_seconds(self) -> float:
        times = psutil.Process(self.process.pid).cpu_times()
        return float(times.user + times.system)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)


def _wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"worker exited with {process.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.2)
    raise RuntimeError(f"worker did not listen on port {port} within {START_TIMEOUT_S} s")


@contextlib.contextmanager
def running_worker() -> Iterator[Worker]:
    """A `specchat worker` subprocess (this checkout's code, one thread), killed on exit."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "worker", "--port", str(port), "--threads", "1"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = Worker(f"127.0.0.1:{port}", process)
    try:
        _wait_listening(port, process)
        yield worker
    finally:
        worker.kill()


@contextlib.contextmanager
def fake_server(reply: str) -> Iterator[str]:
    """A TCP server on 127.0.0.1 that is not a worker; yields its endpoint.

    reply: "garbage" answers any request with HTTP text; "silent" reads and never answers;
    "old-version" answers llama.cpp's hello with protocol version 6.1.0.
    """
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()
    clients: list[socket.socket] = []

    def exactly(client: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = client.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")  # e.g. a plain reachability probe
            data += chunk
        return data

    def answer(client: socket.socket) -> None:
        with contextlib.suppress(OSError):
            # A request starts with a command byte and a little-endian u64 payload size.
            head = exactly(client, 9)
            if reply == "garbage":
                client.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n" * 4)
            elif reply == "old-version":
                size = struct.unpack("<Q", head[1:9])[0]
                exactly(client, size)
                # hello reply: u64 size, then major, minor, patch, padding, capabilities
                client.sendall(struct.pack("<Q", 4 + size) + bytes([6, 1, 0, 0]) + bytes(size))
            while not stop.is_set() and client.recv(4096):
                pass

    def serve() -> None:
        while not stop.is_set():
            try:
                client, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            clients.append(client)
            threading.Thread(target=answer, args=(client,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        for client in clients:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
            client.close()
        server.close()
        thread.join(timeout=5)
