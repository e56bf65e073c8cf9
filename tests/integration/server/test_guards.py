"""The connection and browser guards: request heads and bodies have deadlines, open connections
a cap, and web pages reach the server only from allowed origins and through its own names."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest

from tests.integration.server.conftest import (
    ALLOWED_HOST,
    API_KEY,
    BODY_TIMEOUT_S,
    CORS_ORIGIN,
    HEADER_TIMEOUT_S,
    MAX_CONNECTIONS,
    Server,
)

pytestmark = pytest.mark.network

CHAT = "/v1/chat/completions"
HELLO = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 2}
# Long enough that a server which never closes fails the test, not the suite's patience.
PATIENCE_S = 10 * max(HEADER_TIMEOUT_S, BODY_TIMEOUT_S)


@contextmanager
def raw_connection(server: Server) -> Iterator[socket.socket]:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE_S)
    try:
        yield sock
    finally:
        sock.close()


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (socket.timeout if never)."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def parse_response(raw: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)


def head_of(body_length: int, path: str = CHAT) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {API_KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {body_length}\r\n\r\n"
    ).encode()


def wait_for_log(server: Server, since: int, text: str) -> str:
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        written = server.log()[since:]
        if text in written:
            return written
        time.sleep(0.05)
    raise AssertionError(f"the server never logged {text!r}:\n{server.log()[since:]}")


# -- deadlines and the connection cap -------------------------------------------------------------


@pytest.mark.parametrize(
    "sent",
    [b"", b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"],
    ids=["nothing", "half a head"],
)
def test_a_connection_without_a_whole_head_is_closed_within_the_timeout(
    server: Server, sent: bytes
) -> None:
    with raw_connection(server) as sock:
        sock.sendall(sent)
        assert read_until_closed(sock) == b""


def test_a_keep_alive_connection_that_starts_a_second_head_is_closed(server: Server) -> None:
    body = json.dumps({"prompt": "Hi", "max_tokens": 1}).encode()
    with raw_connection(server) as sock:
        sock.sendall(head_of(len(body), "/v1/completions") + body)
        first = b""
        while b'"usage"' not in first:
            chunk = sock.recv(65536)
            assert chunk, first
            first += chunk
        assert first.startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /health HTTP/1.1\r\n")  # and no more
        assert read_until_closed(sock) == b""


def test_a_half_sent_body_gets_408_and_the_connection_closes(server: Server) -> None:
    with raw_connection(server) as sock:
        sock.sendall(head_of(100) + b'{"messages": ')
        status, payload = parse_response(read_until_closed(sock))
    assert status == 408
    assert payload["error"]["code"] == "timeout"


def test_a_client_leaving_mid_body_is_one_quiet_log_line(server: Server) -> None:
    since = len(server.log())
    with raw_connection(server) as sock:
        sock.sendall(head_of(100) + b'{"messages": ')
    written = wait_for_log(server, since, "closed its connection before sending the whole")
    assert "Traceback" not in written and "ERROR" not in written and "Exception" not in written
    assert server.request("POST", CHAT, HELLO)[0] == 200


def test_connections_beyond_the_cap_get_a_json_503(server: Server) -> None:
    with ExitStack() as idle:
        for _ in range(MAX_CONNECTIONS):
            idle.enter_context(raw_connection(server))
        with raw_connection(server) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            status, payload = parse_response(read_until_closed(sock))
    assert status == 503
    assert payload["error"]["code"] == "too_many_connections"
    # The idle ones are closed now: the server takes connections again.
    deadline = time.monotonic() + PATIENCE_S
    while server.request("GET", "/health")[0] != 200:
        assert time.monotonic() < deadline
        time.sleep(0.05)


# -- content type ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
    ids=["text", "form", "multipart", "none"],
)
def test_a_body_that_is_not_declared_json_gets_415(
    server: Server, content_type: str | None
) -> None:
    before = server.health()["served"]
    status, payload = server.request(
        "POST", CHAT, json.dumps(HELLO).encode(), headers={"Content-Type": content_type}
    )
    assert status == 415, payload
    assert payload["error"]["code"] == "unsupported_media_type"
    assert server.health()["served"] == before


def test_json_with_a_charset_is_json(server: Server) -> None:
    headers = {"Content-Type": "Application/JSON; charset=utf-8"}
    status, payload = server.request("POST", CHAT, HELLO, headers=headers)
    assert status == 200, payload


# -- Host (DNS rebinding) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8080", "127.0.0.1.evil.example", "localhost.evil"]
)
@pytest.mark.parametrize("path", ["/health", "/v1/models", CHAT])
def test_a_foreign_host_is_refused(server: Server, host: str, path: str) -> None:
    method, body = ("POST", HELLO) if path == CHAT else ("GET", None)
    status, payload = server.request(method, path, body, headers={"Host": host})
    assert status == 403, payload
    assert payload["error"]["code"] == "host_not_allowed"
    assert "--allow-host" in payload["error"]["message"]


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "localhost", "LocalHost:1234", "[::1]", "[::1]:8080", ALLOWED_HOST,
     f"{ALLOWED_HOST.upper()}:80"],
)  # fmt: skip
def test_loopback_and_allowed_hosts_are_answered(server: Server, host: str) -> None:
    status, payload = server.request("GET", "/v1/models", headers={"Host": host})
    assert status == 200, payload


# -- Origin ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("origin", ["https://evil.example", "null", f"{CORS_ORIGIN}:8080"])
def test_a_page_from_an_origin_not_listed_is_refused(server: Server, origin: str) -> None:
    for method, path, body in (("POST", CHAT, HELLO), ("GET", "/health", None)):
        status, headers, payload = server.exchange(method, path, body, headers={"Origin": origin})
        assert status == 403, payload
        assert payload["error"]["code"] == "origin_not_allowed"
        assert headers.get("Access-Control-Allow-Origin") is None


def test_a_page_from_the_listed_origin_gets_cors_access(server: Server) -> None:
    status, headers, payload = server.exchange("POST", CHAT, HELLO, headers={"Origin": CORS_ORIGIN})
    assert status == 200, payload
    assert headers.get("Access-Control-Allow-Origin") == CORS_ORIGIN
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request(
            "OPTIONS",
            CHAT,
            headers={
                "Origin": CORS_ORIGIN,
                "Access-Control-Request-Method": "POST",
                # OpenAI's JavaScript SDK adds its own headers (400 "Disallowed CORS headers");
                # the page is public and the server on loopback (Private Network Access).
                "Access-Control-Request-Headers": "authorization, content-type, "
                "x-stainless-os, x-stainless-retry-count",
                "Access-Control-Request-Private-Network": "true",
            },
        )
        preflight = conn.getresponse()
        preflight.read()
    finally:
        conn.close()
    assert preflight.status == 200
    assert preflight.getheader("Access-Control-Allow-Origin") == CORS_ORIGIN
    allowed = (preflight.getheader("Access-Control-Allow-Headers") or "").lower()
    assert "x-stainless-retry-count" in allowed and "authorization" in allowed
    assert preflight.getheader("Access-Control-Allow-Private-Network") == "true"
