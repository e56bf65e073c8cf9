"""llama.cpp's RPC server in a child process that the worker restarts whenever it dies.

llama.cpp's server trusts every frame it reads: an out-of-bounds tensor trips a GGML_ASSERT
and aborts its process. Running it in a child keeps the worker alive through that: the child
dies, the worker notes why (the last line llama.cpp wrote to its log) and starts a new one on
the same port, and the next client is served. The child also dies with the worker: it watches
a pipe from the worker and exits when that closes, even if the worker was killed outright.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from app.errors import InvalidSettingError, RpcError
from app.llama.backend import send_output_to_log

START_TIMEOUT_S = 120.0  # loading llama.cpp on a busy machine takes seconds
_POLL_S = 0.1
_RESTARTS_BEFORE_GIVING_UP = 5
_FAST_DEATH_S = 5.0  # a child that dies this soon after starting cannot serve at all
_BIND_FAILED = 3


@dataclass(frozen=True, slots=True)
class ServerSettings:
    endpoint: str
    device_names: tuple[str, ...]
    n_threads: int
    cache_dir: str | None
    # Clients that reach llama.cpp directly (--insecure-plain) need the keepalive probes the
    # front gives its own connections.
    keepalive: bool = False


def _serve(settings: ServerSettings, log_path: str, lifeline: Connection) -> None:
    send_output_to_log(log_path)
    os.environ["GGML_NO_BACKTRACE"] = "1"  # an abort here is survived, not debugged
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the worker's to handle

    def die_with_the_worker() -> None:
        with contextlib.suppress(EOFError, OSError):
            lifeline.recv()
        os._exit(0)

    threading.Thread(target=die_with_the_worker, daemon=True).start()
    from app.llama import rpc  # noqa: PLC0415 - loads llama.cpp in the child only

    if settings.keepalive:
        from app.llama.rpc_keepalive import start_keepalive_thread  # noqa: PLC0415

        start_keepalive_thread()
    rpc.start_server(
        settings.endpoint, settings.device_names, settings.n_threads, settings.cache_dir
    )
    os._exit(_BIND_FAILED)  # start_server only returns when it cannot listen


def free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _dial_address(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    return ("127.0.0.1" if host in {"0.0.0.0", ""} else host), int(port)


class ServerProcess:
    """One llama.cpp RPC server child at a time on `endpoint`, restarted when it ends."""

    def __init__(
        self, settings: ServerSettings, log_path: Path, report: Callable[[str], None]
    ) -> None:
        self.endpoint = settings.endpoint
        self._settings = settings
        self._log_path = log_path
        self._log_offset = 0
        self._report = report
        self._context = multiprocessing.get_context("spawn")  # no fork: llama.cpp holds threads
        self._process: Any = None
        self._lifeline: Connection | None = None
        self._stopping = False
        self._ready = threading.Event()
        self._gave_up = threading.Event()

    def _spawn(self) -> None:
        ours, theirs = self._context.Pipe()
        self._log_offset = self._log_path.stat().st_size if self._log_path.exists() else 0
        process = self._context.Process(
            target=_serve, args=(self._settings, str(self._log_path), theirs), daemon=True
        )
        process.start()
        theirs.close()
        self._process, self._lifeline = process, ours

    def _wait_listening(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self._process.is_alive():
            with (
                contextlib.suppress(OSError),
                socket.create_connection(_dial_address(self.endpoint), timeout=1),
            ):
                return True
            time.sleep(_POLL_S)
        return False

    def last_words(self) -> str:
        """The last line the current child wrote to its log (why it ended)."""
        try:
            with self._log_path.open("rb") as log:
                log.seek(self._log_offset)
                text = log.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        return lines[-1] if lines else ""

    def start(self) -> None:
        """Start the first child and wait until it listens; InvalidSettingError if it cannot."""
        with contextlib.suppress(OSError):
            self._log_path.unlink()  # the log tells about this run only
        self._spawn()
        if not self._wait_listening():
            code = self._process.exitcode
            self.stop()
            if code == _BIND_FAILED:
                raise InvalidSettingError(f"cannot listen on {self.endpoint}")
            raise RpcError(
                f"llama.cpp's RPC server did not start (exit code {code}): {self.last_words()}"
            )
        self._ready.set()
        threading.Thread(target=self._supervise, name="rpc-server-watch", daemon=True).start()

    def _supervise(self) -> None:
        fast_deaths = 0
        while True:
            started = time.monotonic()
            self._process.join()
            if self._stopping:
                return
            self._ready.clear()
            code = self._process.exitcode
            words = self.last_words()
            self._report(
                f"llama.cpp's RPC server ended (exit code {code}{': ' + words if words else ''}); "
                "restarting it"
            )
            fast_deaths = fast_deaths + 1 if time.monotonic() - started < _FAST_DEATH_S else 0
            if fast_deaths >= _RESTARTS_BEFORE_GIVING_UP:
                self._report("llama.cpp's RPC server keeps ending at start; not restarting it")
                self._gave_up.set()
                return
            self._spawn()
            if self._wait_listening():
                self._ready.set()

    def connect(self, timeout: float) -> socket.socket:
        """A connection to the current child, waiting (up to timeout) while it restarts."""
        if not self._ready.wait(timeout):
            raise OSError("llama.cpp's RPC server is not running")
        sock = socket.create_connection(_dial_address(self.endpoint), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def wait(self) -> None:
        """Block while the server runs or restarts (the plain worker's main loop)."""
        while not self._gave_up.wait(1.0):
            pass
        raise RpcError("the worker stopped: llama.cpp's RPC server cannot run")

    def stop(self) -> None:
        self._stopping = True
        if self._lifeline is not None:
            self._lifeline.close()
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join(timeout=10)
