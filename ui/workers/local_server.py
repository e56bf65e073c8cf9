"""The window's Local server: the OpenAI-compatible API of `specchat serve`, answered by the
models the window has loaded, through its own engine worker (never a second copy of a model).

Requests reach the worker thread as queued signals, so they take turns with the chat's replies
in the worker's one queue. The HTTP side (uvicorn) runs on a thread of its own. Only 127.0.0.1
is offered: other machines never reach a server started from the window.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from app.engine.config import GenerationConfig
from app.engine.events import FinishEvent
from app.engine.gamma import OFF
from app.engine.job_driver import Failed, Job, OwnerEvent, Sink, Ticket
from app.engine.job_queue import DEFAULT_QUEUE_SIZE, Waiting, WaitList
from app.engine.tool_calls import DESCRIBED, ToolDialect
from app.server.app import ServerSettings, create_app
from app.server.host import BackgroundServer, listen
from app.server.schemas import Defaults, NMax, n_max_of
from ui.workers.engine_host import EngineHost

LOOPBACK = "127.0.0.1"


class WorkerOwner(WaitList):
    """The server's EngineOwner on the window's worker thread: each accepted job is announced
    to the worker by a queued signal, so requests take turns with the chat's replies there."""

    def __init__(self, host: EngineHost, *, max_queue: int = DEFAULT_QUEUE_SIZE) -> None:
        super().__init__(host.worker.models.jobs, max_queue=max_queue)
        self._host = host
        # Held across taking a job and noting it, so ahead() never falls between the two.
        self._turn = threading.Lock()
        self._in_turn = False

    def submit(self, job: Job, sink: Sink) -> Ticket:
        ticket = super().submit(job, sink)
        self._host.serveRequested.emit(self)
        return ticket

    def take(self, *, wait: bool) -> Waiting | None:
        with self._turn:
            item = super().take(wait=wait)
            self._in_turn = item is not None
        if item is None:
            return None
        job, sink, ticket = item
        return job, self._until_its_end(sink), ticket

    def _until_its_end(self, sink: Sink) -> Sink:
        def relay(event: OwnerEvent) -> None:
            if isinstance(event, FinishEvent | Failed):
                with self._turn:
                    self._in_turn = False
            sink(event)

        return relay

    def ahead(self) -> bool:
        """Whether a request waits for the worker or runs on it: a chat reply asked for now
        would run after it. Any thread; the window asks before it starts a reply."""
        with self._turn:
            return self._in_turn or self.health()["queued"] > 0


@dataclass(frozen=True, slots=True)
class ServerModels:
    """What the server announces and its defaults, from the window's loaded models and reply
    settings as they are now."""

    model_id: str
    n_ctx: int
    config: GenerationConfig
    n_max: NMax
    tool_dialect: ToolDialect = DESCRIBED  # how the target's template offers functions
    drafts: bool = True  # False with the Draft list at "None": every request runs plain


class LocalServer(QObject):
    """Signals: stateChanged(str url): the server started ("" when it stopped)."""

    stateChanged = Signal(str)

    def __init__(self, host: EngineHost, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._host = host
        self._server: BackgroundServer | None = None
        self._owner: WorkerOwner | None = None
        # Replaced whole (one reference, read by the HTTP thread at each request), so a request
        # never sees half of one setup and half of the next.
        self._settings: ServerSettings | None = None

    @property
    def url(self) -> str:
        return self._server.url if self._server else ""

    @property
    def owner(self) -> WorkerOwner | None:
        return self._owner

    def start(self, port: int, api_key: str, models: ServerModels) -> str:
        """Listen on 127.0.0.1:port; returns the base URL. Raises InvalidSettingError (port
        taken, out of range) with one readable line."""
        self.stop()
        sock = listen(LOOPBACK, port)
        owner = WorkerOwner(self._host)
        self._settings = _settings(models, api_key or None)
        self._owner = owner
        app = create_app(owner, self._current)
        self._server = BackgroundServer(app, sock, owner.stop_accepting)
        self.stateChanged.emit(self._server.url)
        return self._server.url

    def follow(self, models: ServerModels) -> None:
        """Answer the next requests with these models and defaults (the running one keeps
        its own); the API key stays."""
        if self._settings is not None:
            self._settings = _settings(models, self._settings.api_key)

    def request_ahead(self) -> bool:
        """Whether a request waits for the engine worker or runs on it."""
        owner = self._owner
        return owner is not None and owner.ahead()

    def _current(self) -> ServerSettings:
        settings = self._settings
        assert settings is not None, "the app is created after its settings"
        return settings

    def stop(self) -> None:
        server, owner = self._server, self._owner
        self._server = self._owner = None
        if owner is not None:
            owner.stop_accepting()
        if server is not None:
            server.stop()
            self.stateChanged.emit("")


def _settings(models: ServerModels, api_key: str | None) -> ServerSettings:
    return ServerSettings(
        defaults=Defaults(models.config, models.n_max, models.tool_dialect, models.drafts),
        model_id=models.model_id,
        n_ctx=models.n_ctx,
        api_key=api_key,
    )


def n_max_for(config: GenerationConfig, speculation: bool) -> NMax:
    """The window's γ setting as the server's default speculative.n_max."""
    return n_max_of(config.gamma if speculation else OFF)
