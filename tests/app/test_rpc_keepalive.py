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

from app.engine.config import ModelConfig
from app.engine.isolated import IsolatedRuntime
from app.llama import rpc_keepalive
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


def _client_timers(worker_port: int) -> list[str]:
    """The timer column of every established connection to the worker's port."""
    timers = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote_port = int(fields[2].split(":")[1], 16)
        if remote_port == worker_port and fields[3] == "01":  # 01: ESTABLISHED
            timers.append(fields[5].split(":")[0])
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
            port = int(worker.endpoint.rsplit(":", 1)[1])
            for _ in range(20):  # the arming thread looks every half second
                timers = _client_timers(port)
                if timers and all(t == _KEEPALIVE_TIMER for t in timers):
                    break
                time.sleep(0.5)
        finally:
            runtime.close()
    assert timers, "the engine process holds a connection to the worker"
    assert all(timer == _KEEPALIVE_TIMER for timer in timers), timers
