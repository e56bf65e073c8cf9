"""A keyed `specchat worker` (real processes on 127.0.0.1): strangers never reach llama.cpp,
hostile frames from a key holder cost a reconnect but never the worker, and a second client is
told the worker is busy.

llama.cpp's server prints "Accepted client connection" for every connection it accepts, into
the log the worker keeps for it: the count of those lines is what llama.cpp has seen.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from app.errors import RpcConnectError
from app.llama import rpc
from app.llama.rpc_auth import MODE_SESSION, TlsStream, new_client_id, open_stream
from app.llama.rpc_front import LEASE_S
from app.llama.rpc_token import WorkerToken, parse_token
from app.llama.rpc_tunnel import tunnel_to
from tests.helpers.rpc_workers import (
    CMD_ALLOC_BUFFER,
    CMD_BUFFER_GET_BASE,
    CMD_DEVICE_COUNT,
    CMD_GET_TENSOR,
    HELLO,
    REPO,
    Worker,
    f32_tensor,
    frame,
    running_worker,
)

GUARD_S = 60.0
HELLO_REPLY = 4 + 24  # major, minor, patch, padding, transport capabilities


@pytest.fixture(scope="module")
def worker() -> Iterator[Worker]:
    with running_worker() as started:
        yield started


def _session(worker: Worker) -> TlsStream:
    stream = open_stream(
        worker.endpoint, parse_token(worker.key), MODE_SESSION, new_client_id(), GUARD_S
    )
    stream.sock.settimeout(GUARD_S)
    return stream


def _reply(stream: TlsStream) -> bytes:
    (size,) = struct.unpack("<Q", stream.recv_exact(8))
    return stream.recv_exact(size)


def _closed(stream: TlsStream) -> bool:
    try:
        stream.recv_exact(1)
    except (ConnectionError, OSError):
        return True
    return False


def _serves_llama_rpc(worker: Worker) -> None:
    """A fresh session gets llama.cpp's hello and a device count: the worker still serves."""
    stream = _session(worker)
    try:
        stream.send(HELLO)
        hello = _reply(stream)
        assert len(hello) == HELLO_REPLY
        assert (hello[0], hello[1]) == (7, 0), "llama.cpp's RPC protocol version"
        stream.send(frame(CMD_DEVICE_COUNT))
        assert struct.unpack("<I", _reply(stream)) == (1,)
    finally:
        stream.sock.close()


def _wait_until_free(worker: Worker) -> None:
    deadline = time.monotonic() + GUARD_S
    while True:
        try:
            rpc.check_reachable(worker.endpoint)
            return
        except RpcConnectError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_plain_llama_cpp_hello_is_refused_before_llama_cpp_sees_a_byte(worker: Worker) -> None:
    seen = worker.accepted_connections()
    host, port = rpc.split_endpoint(worker.endpoint)
    with socket.create_connection((host, port)) as stranger:
        stranger.settimeout(GUARD_S)
        stranger.sendall(HELLO)
        assert stranger.recv(100) == b"", "no answer, not even a protocol version"
    assert worker.accepted_connections() == seen


def test_a_wrong_key_is_refused_before_llama_cpp_sees_a_byte(worker: Worker) -> None:
    seen = worker.accepted_connections()
    right = parse_token(worker.key)
    wrong = WorkerToken(bytes(len(right.secret)), right.fingerprint)  # the pin right, not the key
    with pytest.raises(RpcConnectError) as caught:
        open_stream(worker.endpoint, wrong, MODE_SESSION, new_client_id(), GUARD_S)
    assert "refused the key" in str(caught.value)
    assert worker.accepted_connections() == seen
    _serves_llama_rpc(worker)
    assert worker.accepted_connections() == seen + 1  # the right key does reach llama.cpp


def test_an_endpoint_without_a_key_is_refused_in_words_before_connecting() -> None:
    with pytest.raises(RpcConnectError) as caught:
        rpc.check_reachable("127.0.0.1:9")  # nothing of ours remembers a key for this one
    assert "no key given" in caught.value.reason
    assert "plain@127.0.0.1:9" in caught.value.reason


def test_another_certificate_behind_the_address_is_refused(worker: Worker) -> None:
    right = parse_token(worker.key)
    forged = WorkerToken(right.secret, bytes(len(right.fingerprint)))
    with pytest.raises(RpcConnectError) as caught:
        open_stream(worker.endpoint, forged, MODE_SESSION, new_client_id(), GUARD_S)
    assert "certificate is not the one this key names" in caught.value.reason


def test_random_bytes_after_the_key_cost_a_reconnect_and_the_worker_serves_on(
    worker: Worker,
) -> None:
    stream = _session(worker)
    stream.send(os.urandom(4096))
    assert _closed(stream), "llama.cpp hung up on the garbage"
    stream.sock.close()
    assert worker.process.poll() is None
    _serves_llama_rpc(worker)


def test_an_out_of_bounds_tensor_aborts_llama_cpp_and_the_worker_restarts_it(
    worker: Worker,
) -> None:
    before = worker.server_pids()
    stream = _session(worker)
    stream.send(HELLO)
    _reply(stream)
    stream.send(frame(CMD_ALLOC_BUFFER, struct.pack("<IQ", 0, 4096)))
    remote_buffer, size = struct.unpack("<QQ", _reply(stream))
    stream.send(frame(CMD_BUFFER_GET_BASE, struct.pack("<Q", remote_buffer)))
    (base,) = struct.unpack("<Q", _reply(stream))
    # 16 floats starting at the buffer's end: ggml-rpc's GGML_ASSERT ends its process.
    request = f32_tensor(remote_buffer, base + size, 16) + struct.pack("<QQ", 0, 64)
    stream.send(frame(CMD_GET_TENSOR, request))
    assert _closed(stream)
    stream.sock.close()
    _serves_llama_rpc(worker)  # waits while the worker starts a new llama.cpp server
    assert worker.process.poll() is None, "the worker itself lives on"
    assert worker.server_pids() and worker.server_pids() != before
    assert "GGML_ASSERT" in worker.llama_log.read_text(errors="replace")


def test_a_second_client_is_told_the_worker_is_busy(worker: Worker) -> None:
    _wait_until_free(worker)
    first = _session(worker)
    try:
        with pytest.raises(RpcConnectError) as caught:
            rpc.check_reachable(worker.endpoint)
        assert "busy serving another client" in caught.value.reason
        with pytest.raises(RpcConnectError) as caught:
            _session(worker)
        assert "busy serving another client" in caught.value.reason
    finally:
        first.sock.close()
    start = time.monotonic()
    _serves_llama_rpc(worker)  # the next one gets in once the first is gone
    assert time.monotonic() - start < LEASE_S + GUARD_S / 2


def test_the_cli_says_busy_in_one_line(worker: Worker, demo_models: object) -> None:
    _wait_until_free(worker)
    first = _session(worker)
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "app.cli",
                "generate",
                "--target",
                str(demo_models.f32),  # type: ignore[attr-defined]
                "--prompt",
                "Hi",
                "--max-tokens",
                "2",
                "--threads",
                "1",
                "--no-spec",
                "--rpc",
                worker.spec,
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=GUARD_S * 3,
            check=False,
        )
    finally:
        first.sock.close()
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: RPC worker {worker.endpoint}: it is busy serving another client (a worker "
        "serves one at a time); try again when that client is done"
    )
    assert worker.key not in proc.stderr  # the secret is never echoed


def test_a_silent_stranger_holds_up_nobody(worker: Worker) -> None:
    _wait_until_free(worker)
    host, port = rpc.split_endpoint(worker.endpoint)
    with socket.create_connection((host, port)) as stranger:  # connects, then says nothing
        _serves_llama_rpc(worker)
        stranger.setblocking(False)
        with pytest.raises(BlockingIOError):  # still waiting for its TLS handshake, not dropped
            stranger.recv(1)


def test_between_its_connections_a_client_keeps_the_worker(worker: Worker) -> None:
    _wait_until_free(worker)
    token = parse_token(worker.key)
    owner = new_client_id()
    open_stream(worker.endpoint, token, MODE_SESSION, owner, GUARD_S).sock.close()
    outcome: list[str] = []

    def another_client() -> None:
        try:
            open_stream(worker.endpoint, token, MODE_SESSION, new_client_id(), GUARD_S)
            outcome.append("admitted")
        except RpcConnectError as exc:
            outcome.append(exc.reason)

    other = threading.Thread(target=another_client)
    other.start()
    time.sleep(LEASE_S / 6)  # the other client now waits for the owner's reservation to end
    back = open_stream(worker.endpoint, token, MODE_SESSION, owner, GUARD_S)
    try:
        other.join(GUARD_S)
    finally:
        back.sock.close()
    assert outcome and "busy serving another client" in outcome[0]


def test_a_refused_tunnel_leaves_its_reason_for_the_error(
    worker: Worker, capsys: pytest.CaptureFixture[str]
) -> None:
    _wait_until_free(worker)
    first = _session(worker)
    try:
        local = tunnel_to(worker.endpoint, parse_token(worker.key))
        with socket.create_connection(rpc.split_endpoint(local)) as llama_cpp:
            llama_cpp.settimeout(GUARD_S)
            assert llama_cpp.recv(1) == b""  # closed: what llama.cpp takes for a dead worker
    finally:
        first.sock.close()
    refused = rpc.tunnel_refusal(capsys.readouterr().err)
    assert refused is not None and refused.endpoint == worker.endpoint
    assert "busy serving another client" in refused.reason
