"""Workers for the RPC tests: `specchat worker` subprocesses and fake servers, all on 127.0.0.1.

A keyed worker's key is made before it starts (in a data folder of its own) and remembered for
its endpoint in the test process, so engine tests reach it through the TLS tunnel by its plain
HOST:PORT, as the window and the CLI do after parsing KEY@HOST:PORT.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from app.llama import rpc_keys
from app.llama.rpc_identity import load_identity

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
    key: str  # the worker's key, or rpc_keys.PLAIN for --insecure-plain
    data_dir: Path

    @property
    def spec(self) -> str:
        """KEY@HOST:PORT, as a user gives it to --rpc."""
        return f"{self.key}@{self.endpoint}"

    @property
    def llama_log(self) -> Path:
        """What llama.cpp's RPC server child wrote (it prints each connection it accepts)."""
        return self.data_dir / "worker" / f"llama-rpc-{self.endpoint.rsplit(':', 1)[1]}.log"

    def accepted_connections(self) -> int:
        try:
            return self.llama_log.read_text(errors="replace").count("Accepted client connection")
        except FileNotFoundError:
            return 0

    def cpu_seconds(self) -> float:
        """CPU time of the worker and its llama.cpp server child, where the work is done."""
        parent = psutil.Process(self.process.pid)
        total = 0.0
        for proc in [parent, *parent.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                times = proc.cpu_times()
                total += float(times.user + times.system)
        return total

    def server_pids(self) -> list[int]:
        """The llama.cpp server children now running under the worker."""
        with contextlib.suppress(psutil.NoSuchProcess):
            return [c.pid for c in psutil.Process(self.process.pid).children(recursive=True)]
        return []

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
def running_worker(*, plain: bool = False, args: tuple[str, ...] = ()) -> Iterator[Worker]:
    """A `specchat worker` subprocess (this checkout's code, one thread), killed on exit.

    Keyed unless plain (then --insecure-plain); its key is remembered for its endpoint here.
    """
    port = free_port()
    data_dir = Path(tempfile.mkdtemp(prefix="specchat-worker-"))
    key = rpc_keys.PLAIN if plain else str(load_identity(data_dir / "worker").token)
    command = [sys.executable, "-m", "app.cli", "worker", "--port", str(port), "--threads", "1"]
    process = subprocess.Popen(
        [*command, *(["--insecure-plain"] if plain else []), *args],
        cwd=REPO,
        env=dict(os.environ, SPECCHAT_DATA_DIR=str(data_dir)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = Worker(f"127.0.0.1:{port}", process, key, data_dir)
    rpc_keys.remember(worker.endpoint, key)
    try:
        _wait_listening(port, process)
        yield worker
    finally:
        worker.kill()
        shutil.rmtree(data_dir, ignore_errors=True)


@contextlib.contextmanager
def fake_server(reply: str) -> Iterator[str]:
    """A TCP server on 127.0.0.1 that is not a worker; yields its endpoint, reached plain.

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
    endpoint = f"127.0.0.1:{server.getsockname()[1]}"
    rpc_keys.remember(endpoint, rpc_keys.PLAIN)  # what llama.cpp itself would meet there
    try:
        yield endpoint
    finally:
        stop.set()
        for client in clients:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
            client.close()
        server.close()
        thread.join(timeout=5)


# -- llama.cpp's RPC protocol by hand, for frames no honest client sends --------------------

CMD_ALLOC_BUFFER = 0
CMD_BUFFER_GET_BASE = 3
CMD_GET_TENSOR = 8
CMD_HELLO = 14
CMD_DEVICE_COUNT = 15
_HELLO_CAPS = 24  # rpc_msg_hello_req: the transport capabilities, none here
_TENSOR = struct.Struct("<QIQ4I4II16ii10QQQQ64si")  # rpc_tensor, packed (ggml-rpc.cpp)
assert _TENSOR.size == 296


def frame(command: int, payload: bytes = b"") -> bytes:
    """A request: command byte, little-endian u64 size, payload."""
    return bytes([command]) + struct.pack("<Q", len(payload)) + payload


HELLO = frame(CMD_HELLO, bytes(_HELLO_CAPS))


def f32_tensor(buffer: int, data: int, elements: int) -> bytes:
    """An rpc_tensor of `elements` floats at address `data` in remote buffer `buffer`."""
    return _TENSOR.pack(
        1, 0, buffer, elements, 1, 1, 1, 4, 4 * elements, 4 * elements, 4 * elements, 0,
        *([0] * 16), 0, *([0] * 10), 0, 0, data, b"probe", 0,
    )  # fmt: skip
