"""The keyed worker's front door, in process on 127.0.0.x with a small deadline: a stranger
dripping a byte at a time is cut when its time is up, and one address's flood of unfinished
connections does not turn another address away."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.llama import rpc_front
from app.llama.rpc_front import Front
from app.llama.rpc_identity import load_identity

DEADLINE_S = 0.5
GUARD_S = 20.0  # far past the deadline: what a connection is given before the test fails
# The first bytes of a TLS ClientHello: what a dripping stranger sends.
HELLO_START = bytes.fromhex("160301020001")


class _NoBackend:
    def connect(self, _wait: float) -> socket.socket:
        raise OSError("no llama.cpp server in this test")


@pytest.fixture
def front(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[int, list[str]]]:
    monkeypatch.setattr(rpc_front, "AUTH_TIMEOUT_S", DEADLINE_S)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    said: list[str] = []
    door = Front(load_identity(tmp_path), listener, _NoBackend(), said.append)  # type: ignore[arg-type]
    threading.Thread(target=door.serve_forever, daemon=True).start()
    yield listener.getsockname()[1], said
    listener.close()


def _connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    conn = socket.socket()
    conn.bind((source, 0))
    conn.connect(("127.0.0.1", port))
    return conn


def _cut(conn: socket.socket, within_s: float = GUARD_S) -> bool:
    """Whether the worker closed `conn` (EOF or reset) within `within_s`."""
    conn.settimeout(within_s)
    try:
        return conn.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_a_stranger_dripping_bytes_is_cut_when_its_time_is_up(
    front: tuple[int, list[str]],
) -> None:
    port, _said = front
    conn = _connect(port)
    stop = threading.Event()

    def drip() -> None:
        for byte in HELLO_START * 100:
            if stop.wait(DEADLINE_S / 5):
                return
            try:
                conn.send(bytes([byte]))
            except OSError:
                return

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    started = time.monotonic()
    try:
        assert _cut(conn)
        # Cut by the deadline, long before a per-read timeout would have let it go.
        assert time.monotonic() - started < GUARD_S
    finally:
        stop.set()
        conn.close()


def test_one_addresss_flood_does_not_turn_another_away(
    front: tuple[int, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    port, said = front
    monkeypatch.setattr(rpc_front, "AUTH_TIMEOUT_S", GUARD_S)  # only the flood closes them
    flood = [_connect(port, "127.0.0.2") for _ in range(rpc_front.MAX_PENDING_PER_PEER + 4)]
    try:
        turned_away = [conn for conn in flood if _closed_at_once(conn)]
        assert len(turned_away) == 4
        assert any("turned away 127.0.0.2" in line for line in said)
        other = _connect(port, "127.0.0.3")
        try:
            assert not _closed_at_once(other)  # let in: its TLS would be answered
        finally:
            other.close()
    finally:
        for conn in flood:
            conn.close()


def _closed_at_once(conn: socket.socket) -> bool:
    return _cut(conn, DEADLINE_S / 5)


def test_an_ipv6_network_counts_as_one_source() -> None:
    first, other_host = "2001:db8:1:2::10", "2001:db8:1:2:aaaa::99"
    assert rpc_front._source(first) == rpc_front._source(other_host) == "2001:db8:1:2::/64"
    assert rpc_front._source("2001:db8:1:3::10") != rpc_front._source(first)
    assert rpc_front._source("::ffff:192.0.2.7") == "192.0.2.7"
    assert rpc_front._source("fe80::1%eth0") == "fe80::/64"
    assert rpc_front._source("127.0.0.2") == "127.0.0.2"
