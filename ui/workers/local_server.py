"""The window's Local server: the OpenAI-compatible API of `specchat serve`, answered by the
models the window has loaded, through its own engine worker (never a second copy of a model).

Requests reach the worker thread as queued signals, so they take turns with the chat's replies
in the worker's one queue. The HTTP side (uvicorn) runs on a thread of its own. Only 127.0.0.1
is offered: other machines never reach a server started from the window.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from app.engine.config import GenerationConfig
from app.engine.gamma import OFF
from app.engine.job_driver import Job, Sink, Ticket
from app.engine.job_queue import DEFAULT_QUEUE_SIZE, WaitList
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

    def submit(self, job: Job, sink: Sink) -> Ticket:
        ticket = super().submit(job, sink)
        self._host.serveRequested.emit(self)
        return ticket


@dataclass(frozen=True, slots=True)
class ServerModels:
    """What the server announces and its defaults, from the window's loaded models."""

    model_id: str
    n_ctx: int
    config: GenerationConfig
    n_max: NMax
    tool_dialect: ToolDialect = DESCRIBED  # how the target's template offers functions


class LocalServer(QObject):
    """Signals: stateChanged(str url): the server started ("" when it stopped)."""

    stateChanged = Signal(str)

    def __init__(self, host: EngineHost, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._host = host
        self._server: BackgroundServer | None = None
        self._owner: WorkerOwner | None = None

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
        settings = ServerSettings(
            defaults=Defaults(models.config, models.n_max, models.tool_dialect),
            model_id=models.model_id,
            n_ctx=models.n_ctx,
            api_key=api_key or None,
        )
        self._owner = owner
        self._server = BackgroundServer(create_app(owner, settings), sock, owner.stop_accepting)
        self.stateChanged.emit(self._server.url)
        return self._server.url

    def stop(self) -> None:
        server, owner = self._server, self._owner
        self._server = self._owner = None
        if owner is not None:
            owner.stop_accepting()
        if server is not None:
            server.stop()
            self.stateChanged.emit("")


def n_max_for(config: GenerationConfig, speculation: bool) -> NMax:
    """The window's γ setting as the server's default speculative.n_max."""
    return n_max_of(config.gamma if speculation else OFF)
