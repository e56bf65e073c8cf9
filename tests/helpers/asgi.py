"""One HTTP request to the server's ASGI app as uvicorn would make it, with no socket: the
tests await `app(scope, receive, send)` themselves, to the end or until they cancel it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

Message = dict[str, Any]


class AsgiPost(NamedTuple):
    scope: dict[str, Any]
    receive: Callable[[], Awaitable[Message]]
    send: Callable[[Message], Awaitable[None]]
    sent: list[Message]  # every message the app sent, in order


def asgi_post(path: str, body: dict[str, Any]) -> AsgiPost:
    """A JSON POST to `path`, from a client that stays connected until the app is done."""
    return _request("POST", path, json.dumps(body).encode())


def asgi_get(path: str) -> AsgiPost:
    """A GET of `path`, from a client that stays connected until the app is done."""
    return _request("GET", path, b"")


def get_json(app: Callable[..., Awaitable[None]], path: str) -> tuple[int, Any]:
    """The status and JSON body `app` answers a GET of `path` with."""

    async def call() -> tuple[int, Any]:
        scope, receive, send, sent = asgi_get(path)
        await app(scope, receive, send)
        status = next(m["status"] for m in sent if m["type"] == "http.response.start")
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        return status, json.loads(body)

    return asyncio.run(call())


def _request(method: str, path: str, body: bytes) -> AsgiPost:
    incoming = [{"type": "http.request", "body": body}]
    sent: list[Message] = []

    async def receive() -> Message:
        if incoming:
            return incoming.pop()
        await asyncio.Event().wait()  # the client stays connected
        raise AssertionError

    async def send(message: Message) -> None:
        sent.append(message)

    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")]
    scope = {"type": "http", "method": method, "path": path, "headers": headers,
             "query_string": b"", "root_path": ""}  # fmt: skip
    return AsgiPost(scope, receive, send, sent)
