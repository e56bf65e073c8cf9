"""A client that goes away stops its generation within one round; a full queue answers 503."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.integration.server.conftest import API_KEY, QUEUE_SIZE, Server

pytestmark = pytest.mark.network

# A raw prompt the small demo model keeps continuing for hundreds of tokens.
COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"
LONG = 400


def open_stream(server: Server, body: dict[str, Any]) -> socket.socket:
    """Send a streaming completion request on a raw socket the test can close at will."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=300)
    payload = json.dumps({**body, "stream": True}).encode()
    head = (
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {API_KEY}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    sock.sendall(head.encode() + payload)
    return sock


def read_events(sock: socket.socket, count: int) -> bytes:
    received = b""
    while received.count(b"data: ") < count:
        chunk = sock.recv(4096)
        assert chunk, f"the stream ended early: {received!r}"
        received += chunk
    return received


def wait_for(server: Server, condition: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        health = server.health()
        if condition(health):
            return health
        time.sleep(0.05)
    raise AssertionError(f"/health never reached the state: {server.health()}")


def test_disconnect_mid_stream_stops_within_one_round(server: Server) -> None:
    before = server.health()["cancelled"]
    sock = open_stream(server, {"prompt": COUNTING, "max_tokens": LONG, "temperature": 0})
    received = read_events(sock, 4)
    assert b" 200 OK" in received.split(b"\r\n", 1)[0]
    sock.close()
    health = wait_for(server, lambda h: h["cancelled"] > before and not h["running"])
    last = health["last_cancel"]
    assert last["reason"] == "client disconnected"
    # The engine reads the stop flag between rounds: the round running when the server learnt
    # of the disconnect may finish, no other.
    assert last["rounds_after_cancel"] <= 1
    assert last["rounds_before_cancel"] + last["rounds_after_cancel"] < LONG
    assert "cancelled (client disconnected)" in server.log()


def test_full_queue_answers_503_and_the_queued_requests_still_run(server: Server) -> None:
    sock = open_stream(server, {"prompt": COUNTING, "max_tokens": LONG, "temperature": 0})
    try:
        read_events(sock, 1)  # the long reply is running, so the next ones must wait
        short = {"prompt": "Hello", "max_tokens": 2, "temperature": 0}
        with ThreadPoolExecutor(QUEUE_SIZE) as pool:
            waiting = [
                pool.submit(server.request, "POST", "/v1/completions", short)
                for _ in range(QUEUE_SIZE)
            ]
            wait_for(server, lambda h: h["queued"] == QUEUE_SIZE)
            status, payload = server.request("POST", "/v1/completions", short)
            assert status == 503
            assert payload["error"]["code"] == "queue_full"
            sock.close()
            answers = [future.result() for future in waiting]
    finally:
        sock.close()
    for status, payload in answers:
        assert status == 200, payload
        assert payload["usage"]["completion_tokens"] >= 1
    assert server.health()["rejected"] >= 1


def test_a_queued_client_that_leaves_frees_its_place_at_once(server: Server) -> None:
    before = server.health()["cancelled"]
    sock = open_stream(server, {"prompt": COUNTING, "max_tokens": LONG, "temperature": 0})
    try:
        read_events(sock, 1)  # the long reply is running, so the next ones must wait
        short = {"prompt": "Hello", "max_tokens": 2, "temperature": 0}
        waiting = [open_stream(server, short) for _ in range(QUEUE_SIZE)]
        wait_for(server, lambda h: h["queued"] == QUEUE_SIZE)
        for client in waiting:
            client.close()
        # Before the long reply ends: the places are free, and the requests count as cancelled.
        health = wait_for(server, lambda h: h["queued"] == 0)
        assert health["running"]
        assert health["cancelled"] == before + QUEUE_SIZE
        assert health["last_cancel"]["reason"] == "client disconnected"
    finally:
        sock.close()
    wait_for(server, lambda h: not h["running"])
    status, payload = server.request("POST", "/v1/completions", short)
    assert status == 200, payload
