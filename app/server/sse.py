"""From the owner thread to the HTTP client: an event-loop queue, the reply's text, SSE framing.

The owner calls `Feed.put` from its own thread; the request's coroutine awaits `Feed` in the
event loop. `reply_stream` turns engine events into safe-to-send text (stop strings applied)
and one closing `ReplyEnd`. A client that goes away cancels its ticket (`watch_disconnect`), so
the engine stops at its next round boundary instead of generating for nobody.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from starlette.types import Receive, Scope, Send

from app.engine.events import FinishEvent, TokenEvent
from app.engine.job_driver import Failed, OwnerEvent, Ticket
from app.engine.logprobs import TokenLogprob
from app.engine.result import GenerationResult
from app.server.stops import StopMatcher


class Feed:
    """Owner events for one request, handed into the request's event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[OwnerEvent] = asyncio.Queue()

    def put(self, event: OwnerEvent) -> None:
        """Called from the owner thread; raises RuntimeError once the loop is closed."""
        self._loop.call_soon_threadsafe(self._queue.put_nowait, event)

    async def get(self) -> OwnerEvent:
        return await self._queue.get()

    async def batch(self) -> list[OwnerEvent]:
        """At least one event, plus all that already arrived: a round's tokens go out together."""
        events = [await self._queue.get()]
        while not self._queue.empty():
            events.append(self._queue.get_nowait())
        return events


@dataclass(frozen=True, slots=True)
class ReplyEnd:
    """How a reply ended: its result (None if the engine failed) and whether a stop string hit."""

    result: GenerationResult | None
    stop_hit: bool
    failure: Failed | None = None


async def reply_stream(
    feed: Feed,
    ticket: Ticket,
    stops: tuple[str, ...],
    logprobs: list[TokenLogprob] | None = None,
) -> AsyncGenerator[str | ReplyEnd, None]:
    """The reply as text pieces, ending with one ReplyEnd. The log probabilities of the tokens
    read before a stop string go to `logprobs` ahead of the piece that holds their text."""
    matcher = StopMatcher(stops)
    while True:
        text: list[str] = []
        for event in await feed.batch():
            if isinstance(event, TokenEvent):
                if logprobs is not None and event.logprob is not None and not matcher.hit:
                    logprobs.append(event.logprob)
                text.append(matcher.push(event.text))
                if matcher.hit:
                    ticket.cancel("stop string")
            elif isinstance(event, FinishEvent | Failed):
                text.append(matcher.flush())
                if "".join(text):
                    yield "".join(text)
                if isinstance(event, Failed):
                    yield ReplyEnd(None, matcher.hit, event)
                else:
                    yield ReplyEnd(event.result, matcher.hit)
                return
        if "".join(text):
            yield "".join(text)


async def watch_disconnect(receive: Receive, ticket: Ticket, gone: asyncio.Event) -> None:
    """Cancel the ticket when the client closes the connection (run as a task, then cancel)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()
    ticket.cancel("client disconnected")


def sse_event(payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


class EventStreamResponse:
    """A text/event-stream response that stops quietly when the client has gone.

    Starlette's StreamingResponse would read `receive` itself to notice a disconnect; here the
    request's own watcher does, so the two never compete for the same messages.
    """

    def __init__(self, chunks: AsyncGenerator[bytes, None], gone: asyncio.Event) -> None:
        self._chunks = chunks
        self._gone = gone

    async def __call__(self, _scope: Scope, _receive: Receive, send: Send) -> None:
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        try:
            async for chunk in self._chunks:
                if self._gone.is_set():
                    return
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            return  # the connection broke while writing: the watcher cancels the ticket
        finally:
            await self._chunks.aclose()
