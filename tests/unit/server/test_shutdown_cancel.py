"""A request that uvicorn cancels (its graceful-shutdown limit ran out while the engine still
worked on it) ends as the API says a reply the shutdown cut short does: a JSON 503 `cancelled`
before anything was sent, an error event and [DONE] in a stream. No traceback is logged.
A request cancelled for any other reason while the server runs is never told it shuts down."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

import pytest

from app.engine.config import GenerationConfig
from app.engine.events import TokenEvent
from app.engine.job_driver import Job, Sink, Started, Ticket
from app.server.app import ServerSettings, create_app
from app.server.schemas import Defaults
from tests.helpers.asgi import asgi_post


class SilentOwner:
    """Takes a job and never ends it, as an engine deep in a long pass; `tell` sends it on."""

    def __init__(self, *events: Any) -> None:
        self.events = events
        self.tickets: list[Ticket] = []
        self.stopping = False
        self.raised_cancelled = False  # how the cancelled request's task ended

    def submit(self, job: Job, sink: Sink) -> Ticket:  # noqa: ARG002
        for event in self.events:
            sink(event)
        self.tickets.append(Ticket(1))
        return self.tickets[-1]

    def health(self) -> dict[str, Any]:
        return {}


def cancelled_request(
    owner: SilentOwner, stream: bool, *, shutdown: bool = True
) -> list[dict[str, Any]]:
    """What the app sent before its task was cancelled: by a shutdown (its owner stopping
    first, as uvicorn's shutdown stops it), or by something else while the server runs."""
    app = create_app(owner, ServerSettings(Defaults(GenerationConfig(max_tokens=40), 4), "m", 512))
    body = {"prompt": "Count.", "stream": stream}

    async def call() -> list[dict[str, Any]]:
        scope, receive, send, sent = asgi_post("/v1/completions", body)
        task = asyncio.create_task(app(scope, receive, send))
        while not owner.tickets or (stream and not sent):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        owner.stopping = shutdown
        # uvicorn cancels a request so once its graceful-shutdown limit runs out.
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        # A shutdown's request ends without raising: uvicorn would log a raise as a traceback.
        owner.raised_cancelled = task.cancelled()
        return sent

    return asyncio.run(call())


def test_a_request_cancelled_before_its_reply_began_gets_a_json_503(
    caplog: pytest.LogCaptureFixture,
) -> None:
    owner = SilentOwner()
    with caplog.at_level(logging.INFO):
        sent = cancelled_request(owner, stream=False)
    start = sent[0]
    assert start["status"] == 503
    assert (b"content-type", b"application/json") in start["headers"]
    body = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    assert body["error"]["code"] == "cancelled"
    assert owner.tickets[0].cancelled  # the engine is told to stop
    assert not owner.raised_cancelled
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def test_a_stream_cancelled_midway_ends_with_an_error_event_and_done(
    caplog: pytest.LogCaptureFixture,
) -> None:
    owner = SilentOwner(Started((1, 2), 0, "plain"), TokenEvent(65, "A", False, 0))
    with caplog.at_level(logging.INFO):
        sent = cancelled_request(owner, stream=True)
    assert sent[0]["status"] == 200
    raw = b"".join(m.get("body", b"") for m in sent[1:]).decode()
    events = [line[6:] for line in raw.splitlines() if line.startswith("data: ")]
    assert json.loads(events[-2])["error"]["code"] == "cancelled"
    assert events[-1] == "[DONE]"
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert not owner.raised_cancelled
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


@pytest.mark.parametrize("stream", [False, True])
def test_a_request_cancelled_while_the_server_runs_is_not_told_it_shuts_down(
    stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    owner = SilentOwner(Started((1, 2), 0, "plain"), TokenEvent(65, "A", False, 0))
    with caplog.at_level(logging.INFO):
        sent = cancelled_request(owner, stream=stream, shutdown=False)
    raw = b"".join(m.get("body", b"") for m in sent).decode()
    assert "shutting down" not in raw and '"cancelled"' not in raw
    assert all(m.get("status") != 503 for m in sent)
    assert not [r for r in caplog.records if "shutting down" in r.getMessage()]
    assert owner.tickets[0].cancelled  # the engine is still told to stop
    # Whoever cancelled it is answered by the cancellation, as asyncio expects.
    assert owner.raised_cancelled
