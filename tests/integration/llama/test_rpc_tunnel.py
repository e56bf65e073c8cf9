"""The worker tunnel tells a connection this process opened from one another process opened."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from app.llama.rpc_tunnel import opened_by_this_process


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/net/tcp (Linux)")
def test_the_tunnel_tells_its_own_process_from_another(listener: socket.socket) -> None:
    host, port = listener.getsockname()[:2]
    with socket.create_connection((host, port)):
        accepted, _ = listener.accept()
        with accepted:
            assert opened_by_this_process(accepted)
    other = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import socket,sys; s=socket.create_connection(('{host}',{port})); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
    )
    try:
        accepted, _ = listener.accept()
        with accepted:
            assert not opened_by_this_process(accepted)
    finally:
        assert other.stdin is not None
        other.stdin.close()
        other.wait(timeout=30)
