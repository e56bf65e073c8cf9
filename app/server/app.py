"""The HTTP routes: /health, /v1/models (and /v1/models/{id}), /v1/chat/completions and
/v1/completions.

Every refusal is OpenAI-style JSON with its 4xx (5xx for the server's own faults), never a
traceback. Requests go to an EngineOwner (app.engine.job_queue), which runs them one at a time;
one that is too big for the context is refused before it takes its turn (app.server.limits).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.engine.job_driver import Failed, Started
from app.engine.job_queue import EngineOwner, QueueFullError
from app.errors import SettingValueError
from app.server.body import read_json
from app.server.errors import ApiError, error_response, refused
from app.server.formats import ReplyFormat
from app.server.guard import RequestGuard
from app.server.limits import Limits, check_message_count, check_prompt_size
from app.server.schemas import ApiRequest, Defaults, parse_chat, parse_completion, request_param
from app.server.sse import (
    CUT_SHORT,
    EventStreamResponse,
    Feed,
    ReplyEnd,
    reply_stream,
    sse_event,
    watch_disconnect,
)

log = logging.getLogger(__name__)

# Paths a client may call without the API key: liveness checks carry no model output.
OPEN_PATHS = frozenset({"/health"})


@dataclass(frozen=True, slots=True)
class ServerSettings:
    defaults: Defaults
    model_id: str
    n_ctx: int
    api_key: str | None = None
    cors_origins: tuple[str, ...] = ()
    # Host names beyond the loopback ones that requests may be addressed to ("*": any).
    allowed_hosts: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)


# The settings each request is answered by, read as it arrives.
SettingsSource = Callable[[], ServerSettings]


def create_app(owner: EngineOwner, settings: ServerSettings | SettingsSource) -> Starlette:
    """settings: fixed (`specchat serve`), or a source read at each request, for a server that
    follows a window whose models and reply settings change while it runs. Who may call it (the
    API key, origins, host names) is the first reading's: a running server keeps its door."""
    current = settings if callable(settings) else _always(settings)
    door = current()

    async def health(_request: Request) -> Response:
        requests = owner.health()
        # What the models hold (weights, KV caches, saved conversations) as of the last request.
        memory = requests.pop("memory", None)
        # As llama-server's 503 while it loads: a balancer or a script waiting on the server
        # must not read "ok" while no model can answer (an RPC worker stopped answering).
        down = requests.pop("unavailable", None)
        return JSONResponse(
            {
                "status": "ok" if down is None else "unavailable",
                **({} if down is None else {"reason": down}),
                "model": current().model_id,
                "memory": memory,
                "requests": requests,
            },
            status_code=200 if down is None else 503,
        )

    async def models(_request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [_model_object(current())]})

    async def model(request: Request) -> Response:
        served = current()
        asked = request.path_params["model_id"]
        if asked != served.model_id:
            # OpenAI's answer to a model it does not have; the SDK raises NotFoundError on it.
            return error_response(
                ApiError(
                    404,
                    f"the model {asked!r} does not exist; this server serves {served.model_id!r}",
                    code="model_not_found",
                    param=None,  # as OpenAI answers it: the path names the model, not a field
                    error_type="invalid_request_error",
                )
            )
        return JSONResponse(_model_object(served))

    chat, completions = (
        _Completions(owner, current, chat=True),
        _Completions(owner, current, chat=False),
    )
    routes = [Route("/health", health, methods=["GET"])]
    # Under /v1 and, as llama-server also answers them, without it: clients given a base URL
    # without /v1 reach the same endpoints.
    for prefix in ("/v1", ""):
        routes += [
            Route(f"{prefix}/models", models, methods=["GET"]),
            # `path`: an id may hold a "/", as other servers' ids ("org/name") do.
            Route(f"{prefix}/models/{{model_id:path}}", model, methods=["GET"]),
            Route(f"{prefix}/chat/completions", chat, methods=["POST"]),
            Route(f"{prefix}/completions", completions, methods=["POST"]),
        ]
    # Outermost: a page on a foreign origin, or reaching the server through a foreign name,
    # learns nothing, not even whether a key is required.
    middleware = [Middleware(RequestGuard, hosts=door.allowed_hosts, origins=door.cors_origins)]
    if door.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(door.cors_origins),
                allow_methods=["GET", "POST"],
                # Whatever a client library adds (OpenAI's JavaScript SDK sends X-Stainless-*
                # headers on every request): the origin, allowed by name, is the boundary.
                allow_headers=["*"],
                # A page from the allowed origin reaches this loopback server from a public
                # one; browsers that check Private Network Access ask first, and the user's
                # --cors-origin is the answer.
                allow_private_network=True,
            )
        )
    if door.api_key:
        middleware.append(Middleware(BearerAuth, api_key=door.api_key))
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )
    # A path with a trailing slash is a 404 in words: Starlette's 307 to the path without it
    # has an empty body, and clients that do not follow redirects (httpx, so the openai SDK)
    # report nothing useful.
    app.router.redirect_slashes = False
    return app


def _model_object(served: ServerSettings) -> dict[str, object]:
    """The loaded model as OpenAI's model object; `meta` tells a client its context size."""
    return {
        "id": served.model_id,
        "object": "model",
        "created": 0,
        "owned_by": "specchat",
        "meta": {"n_ctx": served.n_ctx},
    }


def _always(settings: ServerSettings) -> SettingsSource:
    return lambda: settings


# -- errors ---------------------------------------------------------------------------------------


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        error = ApiError(404, f"no route {request.url.path}", code="not_found")
    elif exc.status_code == 405:
        error = ApiError(
            405, f"{request.method} is not allowed on {request.url.path}", code="method_not_allowed"
        )
    else:
        error = ApiError(exc.status_code, str(exc.detail), code="http_error")
    return error_response(error, dict(exc.headers or {}))


async def _server_error(_request: Request, exc: Exception) -> Response:
    log.error("unexpected error", exc_info=exc)
    error = ApiError(500, "internal server error; see the server log", code="internal")
    return error_response(error)


def _failure_error(failure: Failed, *, chat: bool) -> ApiError:
    if failure.kind == "context":
        prompt_field = "messages" if chat else "prompt"
        return ApiError(400, failure.message, code="context_length_exceeded", param=prompt_field)
    if failure.kind == "invalid":
        error = failure.error
        param = request_param(error, chat=chat) if isinstance(error, SettingValueError) else None
        return ApiError(400, failure.message, code="invalid_value", param=param)
    if failure.kind == "cancelled":
        return ApiError(503, failure.message, code="cancelled")
    if failure.kind == "unavailable":
        return ApiError(503, failure.message, code="unavailable")
    return ApiError(500, failure.message, code="internal")


class BearerAuth:
    """Requires `Authorization: Bearer <key>` on every path but the open ones."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self._app = app
        self._expected = api_key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            scheme, _, given = dict(scope["headers"]).get(b"authorization", b"").partition(b" ")
            # The scheme's name is case-insensitive (RFC 9110, 11.1): "bearer KEY" is sent too.
            # The key in constant time, so it cannot be guessed byte by byte from response times.
            if not (hmac.compare_digest(given, self._expected) and scheme.lower() == b"bearer"):
                error = ApiError(401, "missing or wrong API key", code="invalid_api_key")
                response = error_response(error, {"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


# -- completions ----------------------------------------------------------------------------------


class _Completions:
    """One completion endpoint, as a raw ASGI app: it needs `receive` to notice a disconnect
    for as long as the reply runs, including while the response streams."""

    def __init__(self, owner: EngineOwner, settings: SettingsSource, *, chat: bool) -> None:
        self._owner = owner
        self._settings = settings
        self._chat = chat

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        # Read once: the whole request is answered by the settings it arrived under.
        settings = self._settings()
        try:
            body = await read_json(
                request, settings.limits.max_body_bytes, settings.limits.body_timeout_s
            )
            if self._chat:
                check_message_count(body, settings.limits, settings.n_ctx)
            parse = parse_chat if self._chat else parse_completion
            parsed = parse(body, settings.defaults)
            check_prompt_size(parsed, settings.limits, settings.n_ctx)
        except ClientDisconnect:
            # Nobody is left to answer: a client giving up is routine, not a server fault.
            log.info("a client closed its connection before sending the whole request")
            return
        except ApiError as exc:
            await error_response(exc)(scope, receive, send)
            return
        feed = Feed(asyncio.get_running_loop(), parsed.stops)
        try:
            ticket = self._owner.submit(parsed.job(), feed.put)
        except QueueFullError as exc:
            error = refused(exc, 503, code="queue_full", error_type="server_error")
            await error_response(error, {"Retry-After": "1"})(scope, receive, send)
            return
        gone = asyncio.Event()
        watcher = asyncio.create_task(watch_disconnect(receive, ticket, gone))
        sent = _SentSoFar(send)
        try:
            response = await self._respond(parsed, feed, gone, settings.model_id)
            await response(scope, receive, sent)
        except asyncio.CancelledError:
            if not self._owner.stopping:
                # Not this server stopping (uvicorn cancels a request only once its graceful
                # shutdown runs out of time): whoever cancelled the task, such as an ASGI server
                # that cancels a request when its client leaves, or a timeout around the app,
                # handles it. The engine stops for it below; no client is told of a shutdown.
                log.info("request %d cancelled before its reply ended", ticket.job_id)
                raise
            # The server gave up waiting for this request: it ends here, as a reply the
            # shutdown cut short, not as a traceback in the log and a text/plain 500 from uvicorn.
            log.info("request %d cut short: the server is shutting down", ticket.job_id)
            if not gone.is_set():
                await sent.cut_short(scope, receive)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            ticket.cancel("response ended early")  # a no-op when the reply finished

    async def _respond(
        self, parsed: ApiRequest, feed: Feed, gone: asyncio.Event, model_id: str
    ) -> ASGIApp:
        first = await feed.get()
        if isinstance(first, Failed):
            return error_response(_failure_error(first, chat=self._chat))
        assert isinstance(first, Started)
        fmt = ReplyFormat(parsed, model_id)
        replies = reply_stream(feed, fmt.logprobs)
        if parsed.stream:
            return EventStreamResponse(_sse(fmt, first, replies), gone)
        text: list[str] = []
        async for piece in replies:
            if isinstance(piece, str):
                text.append(piece)
                continue
            if piece.result is None:
                assert piece.failure is not None
                return error_response(_failure_error(piece.failure, chat=self._chat))
            return JSONResponse(fmt.completion("".join(text), piece.result, first, piece.stop_hit))
        raise AssertionError("a reply always ends with ReplyEnd")


class _SentSoFar:
    """A request's `send`, noting how far the response got, so a request cut short ends it as
    the API says: a JSON 503 before it began, an error event and [DONE] in a stream."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False
        self.complete = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.complete = True
        await self._send(message)

    async def cut_short(self, scope: Scope, receive: Receive) -> None:
        error = ApiError(503, CUT_SHORT, code="cancelled")
        # The connection may be closing too: whatever cannot be sent any more is not sent.
        with contextlib.suppress(Exception):
            if not self.started:
                await error_response(error)(scope, receive, self)
            elif not self.complete:
                for chunk in (sse_event(error.body()), sse_event("[DONE]")):
                    await self({"type": "http.response.body", "body": chunk, "more_body": True})
                await self({"type": "http.response.body", "body": b"", "more_body": False})


async def _sse(
    fmt: ReplyFormat, started: Started, replies: AsyncGenerator[str | ReplyEnd, None]
) -> AsyncGenerator[bytes, None]:
    try:
        opening = fmt.opening_chunk()
        if opening is not None:
            yield sse_event(opening)
        async for piece in replies:
            if isinstance(piece, str):
                for chunk in fmt.text_chunks(piece):
                    yield sse_event(chunk)
            elif piece.result is not None:
                for chunk in fmt.closing_chunks(piece.result, started, piece.stop_hit):
                    yield sse_event(chunk)
            else:
                assert piece.failure is not None
                yield sse_event(_failure_error(piece.failure, chat=fmt.chat).body())
        yield sse_event("[DONE]")
    finally:
        await replies.aclose()
