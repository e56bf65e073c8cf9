"""The worker thread that owns the models; the only code in ui/ that calls llama.cpp.

EngineHost (UI thread) creates an EngineWorker, moves it into its own QThread and talks to it
only through queued signals: `…Requested` in, result signals out, each carrying plain immutable
data. What is loaded, and how a load changes it, is the Qt-free ModelHost's
(app/engine/model_host.py); the worker runs it on this thread and turns its results into
signals. Stop and cancel cannot wait in the worker's queue behind the very generation or load
they interrupt, so they are flags (GenerationControl, LoadTicket) the UI thread sets directly
and the engine reads between rounds or in the load progress callback.
"""

# Qt signals keep Qt's camelCase (…Requested, …Changed), like Qt's own.

from __future__ import annotations

import logging
import os
import sys
import threading
from functools import partial
from typing import TypedDict

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app.engine.corpus_files import forget_every_vocabulary
from app.engine.events import FinishEvent, NoticeEvent, RoundEvent, TokenEvent
from app.engine.isolated import IsolatedRuntime
from app.engine.job_driver import Failed, Job, OwnerEvent, Started, Ticket, drive
from app.engine.job_queue import WaitList
from app.engine.model_host import FileCheck, LoadRequest, ModelHost, RemoteRuntimeFactory
from app.engine.past_chats import stored_chats
from app.engine.runtime import Runtime
from app.engine.session import EngineSession
from app.errors import Cancelled
from app.paths import data_dir, database_path
from models.compat import check_draft_file
from models.demo import DemoModels, ensure_demo_models
from models.probe import ensure_loadable
from ui.messages import describe
from ui.workers.requests import GenerateRequest, GenerationFailure, LoadFailure, RuntimeTask

log = logging.getLogger(__name__)
# Idle time after a local server request before the chat is read back into the caches: a
# burst of requests pays the read-back once, after its last request.
_CHAT_RESTORE_DELAY_MS = 500

# Nice increment of the engine thread relative to the UI thread (see lower_priority).
ENGINE_NICE = 5


class EngineOptions(TypedDict, total=False):
    """EngineWorker's keywords, as EngineHost and the window's factory take them to pass on."""

    runtime: Runtime | None
    check_file: FileCheck | None
    remote_runtime: RemoteRuntimeFactory | None


class EngineWorker(QObject):
    """Runs the ModelHost (`models`) and the jobs on its models. Lives in the engine thread;
    every slot runs there.

    The local models run in the in-process Runtime, models on RPC workers in an
    IsolatedRuntime (a child process that may die without taking the window along); the
    window's defaults for both, and model management's file checks, are given to the host here.

    Signals:
        loadProgress(str, float): stage text and 0..1 while preparing or loading models.
        modelsLoaded(LoadedState): a load request finished and these models are held.
        loadFailed(LoadFailure): a load failed or was cancelled; `state` is what is held now.
        modelsLost(LoadedState): the models went away outside a load (an RPC worker died).
        memoryChanged(MemoryUsage): what the loaded models hold after a reply, a server request
            or a read-back changed their saved conversations.
        tokenReceived(TokenEvent), roundReceived(RoundRecord), noticeReceived(str):
            a generation's stream, in order.
        generationFinished(GenerationResult), generationFailed(GenerationFailure).
        serveStarted(), serveRound(RoundRecord), serveEnded(GenerationResult or None): a local
            server request running on these models (ui/workers/local_server.py).
        shutDown(): the models are freed; the thread is about to end.
    """

    loadProgress = Signal(str, float)
    modelsLoaded = Signal(object)
    loadFailed = Signal(object)
    modelsLost = Signal(object)
    memoryChanged = Signal(object)
    tokenReceived = Signal(object)
    roundReceived = Signal(object)
    noticeReceived = Signal(str)
    generationFinished = Signal(object)
    generationFailed = Signal(object)
    serveStarted = Signal()
    serveRound = Signal(object)
    serveEnded = Signal(object)
    shutDown = Signal()

    def __init__(
        self,
        runtime: Runtime | None = None,
        *,
        check_file: FileCheck | None = None,
        remote_runtime: RemoteRuntimeFactory | None = None,
    ) -> None:
        super().__init__()
        # The past-chats index lives beside the chat history; the suffix drafter reads it and
        # every reply joins it.
        local = runtime or Runtime(
            vet_draft=check_draft_file,
            history_dir=data_dir(),
            history_source=lambda tokens: stored_chats(database_path(), tokens),
        )
        self.models: ModelHost[DemoModels] = ModelHost(
            local,
            remote_runtime=remote_runtime or _isolated_runtime,
            check_file=check_file or ensure_loadable,
            prepare_demo=ensure_demo_models,
            progress=self.loadProgress.emit,
        )
        self._served = 0  # how many server requests have run

    # -- loading ------------------------------------------------------------------------------

    @Slot(object)
    def load(self, request: LoadRequest) -> None:
        try:
            state = self.models.load(request)
        except Cancelled:
            failure = LoadFailure("Model loading cancelled.", True, self.models.state())
        except Exception as exc:
            failure = LoadFailure(describe(exc), False, self.models.state())
        else:
            self.modelsLoaded.emit(state)
            return
        self.loadFailed.emit(failure)

    def _check_lost(self) -> None:
        """After a failed reply: if the models went with it (an RPC worker died), say so."""
        state = self.models.check_lost()
        if state is not None:
            self.modelsLost.emit(state)

    # -- generating ---------------------------------------------------------------------------

    @Slot(object)
    def generate(self, request: GenerateRequest) -> None:
        """A chat reply: the same driver as a server request, its events turned into signals."""
        prompt_ids: tuple[int, ...] = ()

        def sink(event: OwnerEvent) -> None:
            nonlocal prompt_ids
            if isinstance(event, Started):
                prompt_ids = event.prompt_ids
            elif isinstance(event, TokenEvent):
                self.tokenReceived.emit(event)
            elif isinstance(event, RoundEvent):
                self.roundReceived.emit(event.record)
            elif isinstance(event, NoticeEvent):
                self.noticeReceived.emit(event.message)
            elif isinstance(event, FinishEvent):
                self.models.remember_chat([*prompt_ids, *event.result.token_ids])
                self.generationFinished.emit(event.result)
            else:
                error = event.error
                message = event.message if error is None else describe(error, logged=True)
                self.generationFailed.emit(
                    GenerationFailure(
                        request.request_id,
                        message,
                        cancelled=event.kind == "cancelled",
                        too_long=event.kind == "context",
                    )
                )

        job = Job(request.config, messages=request.messages)
        ticket = Ticket(request.request_id, request.control)
        if drive(self.models.runtime, job, sink, ticket) == "failed":
            self._check_lost()
        self._report_memory()

    @Slot(object)
    def serve(self, owner: WaitList) -> None:
        """Answer the local server's oldest waiting request; the chat's replies and these take
        turns. Nothing waits when the server stopped meanwhile: it told the client already."""
        waiting = owner.take(wait=False)
        if waiting is None:
            return
        job, client, ticket = waiting

        def sink(event: OwnerEvent) -> None:
            if isinstance(event, RoundEvent):
                self.serveRound.emit(event.record)
            try:
                client(event)
            finally:
                # After the owner heard the end (WorkerOwner.ahead), even when its client
                # failed: the window, told next, must find this request gone.
                if isinstance(event, FinishEvent):
                    self.serveEnded.emit(event.result)
                elif isinstance(event, Failed):
                    self.serveEnded.emit(None)

        self.serveStarted.emit()
        self._served += 1
        # Local server requests run here, on the models the chat uses: one owner per model.
        self.models.jobs.run(job, sink, ticket)
        self._check_lost()
        self._report_memory()
        # The request took the models' caches; read the chat back into them once requests
        # pause, so the next reply does not re-read the whole conversation before its first
        # token. A request that comes first makes the read-back moot.
        QTimer.singleShot(_CHAT_RESTORE_DELAY_MS, self, partial(self._restore_chat, self._served))

    def _restore_chat(self, served: int) -> None:
        if served == self._served:
            self.models.read_chat_back()
            self._report_memory()

    def _report_memory(self) -> None:
        usage = self.models.memory_now()
        if usage is not None:
            self.memoryChanged.emit(usage)

    @Slot(object)
    def run_task(self, task: RuntimeTask) -> None:
        """Run work that needs the loaded models (the Compare benchmark) on this thread."""
        try:
            task(self.models.runtime)
        except Exception:
            log.exception("a task on the engine thread failed")

    # -- lifetime -----------------------------------------------------------------------------

    @Slot()
    def lower_priority(self) -> None:
        """Let the UI thread win the CPU when both want it (Linux: per-thread nice).

        On a busy machine a runnable engine thread delays the UI thread's wake-ups by tens of
        milliseconds; a few nice steps below the UI thread make the scheduler prefer the UI,
        and cost nothing when the CPU is otherwise idle. llama.cpp's compute threads, started
        from this thread, inherit it.
        """
        lower_thread_priority(ENGINE_NICE)

    @Slot()
    def shutdown(self) -> None:
        self.models.close()
        self.shutDown.emit()
        thread = self.thread()
        thread.quit()


def _isolated_runtime() -> EngineSession:
    return IsolatedRuntime(vet_draft=check_draft_file)


def lower_thread_priority(increment: int) -> None:
    """Raise the calling thread's nice value on Linux, where threads have their own."""
    if sys.platform != "linux":
        return
    tid = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, current + increment))
    except OSError as exc:  # a sandbox may forbid it; the app works the same, less smoothly
        log.debug("cannot lower the engine thread's priority: %s", exc)


def forget_history(runtime: EngineSession) -> None:
    """A RuntimeTask: rebuild the past-chats index from the chats that remain. A model on RPC
    workers drafts from no past chats, but the indexes on disk hold the deleted ones all the
    same."""
    if isinstance(runtime, Runtime):
        runtime.forget_history()
    else:
        forget_every_vocabulary(data_dir())
