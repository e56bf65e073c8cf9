"""TCP keepalive on RPC connections, so a worker machine that vanishes ends a reply."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.engine.isolated import IsolatedRuntime
from app.llama import rpc_keepalive
from app.llama.config import ModelConfig
from tests.helpers.rpc_workers import running_worker

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="keepalive arming reads /proc (Linux only)"
)
_KEEPALIVE_TIMER = "02"  # /proc/net/tcp "tr" column: the keepalive timer is running


@pytest.fixture
def connection() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        yield client
        client.close()
        accepted.close()


def test_connected_tcp_sockets_of_this_process_get_keepalive(connection: socket.socket) -> None:
    assert connection.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 0
    seen: set[str] = set()
    assert rpc_keepalive.arm_tcp_connections(seen) >= 1
    assert connection.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
    idle = connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE)
    count = connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT)
    assert (idle, count) == (rpc_keepalive.IDLE_S, rpc_keepalive.PROBES)
    assert rpc_keepalive.arm_tcp_connections(seen) == 0  # each socket is armed once


def _timers(port: int, *, side: int) -> list[str]:
    """The timer column of every established connection with `port` on one side: 1 for this
    end (a worker's accepted clients), 2 for the far end (a client's worker connections)."""
    timers = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[side].split(":")[1], 16) == port and fields[3] == "01":  # ESTABLISHED
            timers.append(fields[5].split(":")[0])
    return timers


def _wait_for_keepalive(port: int, *, side: int) -> list[str]:
    timers: list[str] = []
    for _ in range(20):  # the arming thread looks every half second
        timers = _timers(port, side=side)
        if timers and all(t == _KEEPALIVE_TIMER for t in timers):
            break
        time.sleep(0.5)
    return timers


@pytest.mark.model
def test_the_engine_process_keeps_its_worker_connection_alive_with_probes(
    demo_models: Any,
) -> None:
    target = ModelConfig(str(demo_models.f32), n_ctx=256, n_threads=1)
    with running_worker() as worker:
        runtime = IsolatedRuntime()
        try:
            runtime.load_target(replace(target, rpc_servers=(worker.endpoint,)))
            timers = _wait_for_keepalive(int(worker.endpoint.rsplit(":", 1)[1]), side=2)
        finally:
            runtime.close()
    assert timers, "the engine process holds a connection to the worker"
    assert all(timer == _KEEPALIVE_TIMER for timer in timers), timers


def test_a_worker_keeps_its_client_connection_alive_with_probes() -> None:
    with running_worker() as worker:
        host, port = worker.endpoint.rsplit(":", 1)
        with socket.create_connection((host, int(port))):  # a client that then goes quiet
            timers = _wait_for_keepalive(int(port), side=1)
    assert timers, "the worker accepted the client"
    assert all(timer == _KEEPALIVE_TIMER for timer in timers), timers
