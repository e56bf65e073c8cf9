"""From the owner thread to the HTTP client: an event-loop queue, the reply's text, SSE framing.

The owner calls `Feed.put` from its own thread; the request's coroutine awaits `Feed` in the
event loop. Stop strings are applied in `put`, on the owner's thread, so a match stops the
engine at the end of the round that made it (ReplyComplete) rather than whenever the event loop
gets to it; the loop side receives text that is safe to send and one closing `ReplyEnd`. A
client that goes away cancels its ticket (`watch_disconnect`), so the engine stops at its next
round boundary instead of generating for nobody.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.types import Receive, Scope, Send

from app.engine.events import FinishEvent, TokenEvent
from app.engine.job_driver import Failed, OwnerEvent, ReplyComplete, Started, Ticket
from app.engine.logprobs import TokenLogprob
from app.engine.result import GenerationResult
from app.server.stops import Piece, ReplyCut

CUT_SHORT = "the reply was stopped before it ended (the server is shutting down)"


@dataclass(frozen=True, slots=True)
class ReplyEnd:
    """How a reply ended: its result as returned (None if the engine failed or the reply was
    cut short, with `failure` saying which) and whether a stop string cut it."""

    result: GenerationResult | None
    stop_hit: bool
    failure: Failed | None = None


FeedItem = Started | Failed | Piece | ReplyEnd


class Feed:
    """One request's reply, handed from the owner thread into the request's event loop: its
    `Started` (or `Failed`), then Pieces of text and one ReplyEnd."""

    def __init__(self, loop: asyncio.AbstractEventLoop, stops: Sequence[str] = ()) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[FeedItem] = asyncio.Queue()
        self._cut = ReplyCut(stops)
        self._started = False

    def put(self, event: OwnerEvent) -> None:
        """The owner's Sink, called on its thread (a job that never started is told on the
        thread that withdrew it: any thread). Raises ReplyComplete once a stop string matched,
        and RuntimeError once the loop is closed."""
        if isinstance(event, TokenEvent):
            was_hit = self._cut.hit
            self._send_piece(self._cut.push(event))
            if self._cut.hit and not was_hit:
                raise ReplyComplete(self._cut.tokens)
        elif isinstance(event, Started):
            self._started = True
            self._send(event)
        elif isinstance(event, Failed) and not self._started:
            self._send(event)
        elif isinstance(event, Failed):
            self._send_piece(self._cut.flush())
            self._send(ReplyEnd(None, self._cut.hit, event))
        elif isinstance(event, FinishEvent):
            self._send_piece(self._cut.flush())
            result = self._cut.trimmed(event.result)
            if result.finish_reason == "cancelled":
                # Stopped from outside (the server shutting down): a cut reply read as
                # complete would mislead, so the client is told as a queued one would be.
                self._send(ReplyEnd(None, False, Failed(CUT_SHORT, "cancelled")))
            else:
                self._send(ReplyEnd(result, self._cut.hit))
        # Rounds and notices are the engine's business; the client hears of them in the end.

    def _send_piece(self, piece: Piece) -> None:
        if piece.text or piece.logprobs:
            self._send(piece)

    def _send(self, item: FeedItem) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    async def get(self) -> FeedItem:
        return await self._queue.get()

    async def batch(self) -> list[FeedItem]:
        """At least one item, plus all that already arrived: a round's tokens go out together."""
        items = [await self._queue.get()]
        while not self._queue.empty():
            items.append(self._queue.get_nowait())
        return items


async def reply_stream(
    feed: Feed, logprobs: list[TokenLogprob] | None = None
) -> AsyncGenerator[str | ReplyEnd, None]:
    """The reply after its Started, as text pieces, ending with one ReplyEnd. The log
    probabilities of the tokens that begin in a piece go to `logprobs` ahead of it."""
    while True:
        text: list[str] = []
        for item in await feed.batch():
            if isinstance(item, Piece):
                if logprobs is not None:
                    logprobs.extend(item.logprobs)
                text.append(item.text)
            elif isinstance(item, ReplyEnd):
                if "".join(text):
                    yield "".join(text)
                yield item
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
