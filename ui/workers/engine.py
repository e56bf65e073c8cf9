"""The worker thread that owns the models; the only code in ui/ that calls llama.cpp.

EngineHost (UI thread) creates an EngineWorker, moves it into its own QThread and talks to it
only through queued signals: `…Requested` in, result signals out, each carrying plain immutable
data. Stop and cancel cannot wait in the worker's queue behind the very generation or load they
interrupt, so they are flags (GenerationControl, LoadTicket) the UI thread sets directly and the
engine reads between rounds or in the load progress callback.
"""

# Qt signals keep Qt's camelCase (…Requested, …Changed), like Qt's own.

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app.engine.events import FinishEvent, NoticeEvent, RoundEvent, TokenEvent
from app.engine.history_corpus import stored_documents
from app.engine.isolated import IsolatedRuntime
from app.engine.job_queue import Failed, Job, JobRunner, OwnerEvent, job_events
from app.engine.runtime import MemoryUsage, Runtime
from app.engine.session import EngineSession
from app.engine.tool_calls import DESCRIBED
from app.errors import Cancelled, DraftIncompatibleError, SpecChatError
from app.llama.config import ModelConfig
from app.paths import data_dir, database_path
from app.store import ConversationStore, StoreError
from models.compat import check_draft_file
from models.demo import DemoModels, ensure_demo_models
from models.probe import ensure_loadable
from ui.messages import describe
from ui.workers.requests import (
    DraftChoice,
    FileCheck,
    GenerateRequest,
    GenerationFailure,
    LoadedState,
    LoadFailure,
    LoadRequest,
    LoadTicket,
    RemoteRuntimeFactory,
    RuntimeTask,
    ServeRequest,
)

log = logging.getLogger(__name__)
# Idle time after a local server request before the chat is read back into the caches: a
# burst of requests pays the read-back once, after its last request.
_CHAT_RESTORE_DELAY_MS = 500

# Nice increment of the engine thread relative to the UI thread (see lower_priority).
ENGINE_NICE = 5


class EngineWorker(QObject):
    """Owns the runtime. Lives in the engine thread; every slot runs there.

    Models on RPC workers run in an IsolatedRuntime (a child process that may die without
    taking the window along); local models in the in-process Runtime. A load switches between
    them as its configs ask, freeing the other first.

    Signals:
        loadProgress(str, float): stage text and 0..1 while preparing or loading models.
        modelsLoaded(LoadedState): a load request finished and these models are held.
        loadFailed(LoadFailure): a load failed or was cancelled; `state` is what is held now.
        modelsLost(LoadedState): the models went away outside a load (an RPC worker died).
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
        self._local: EngineSession = runtime or Runtime(
            vet_draft=check_draft_file, history_dir=data_dir(), history_source=_stored_chats
        )
        self._new_remote = remote_runtime or _isolated_runtime
        self._runtime: EngineSession = self._local
        self._remote = False
        self._check_file = check_file or ensure_loadable
        # Local server requests run here, on the models the chat uses: one owner per model.
        self.jobs = JobRunner(self._runtime)
        self._target: ModelConfig | None = None
        self._draft = DraftChoice("none")
        self._demo: DemoModels | None = None
        # The token ids of the chat's last exchange, and how many server requests have run.
        self._chat_tokens: list[int] = []
        self._served = 0

    # -- loading ------------------------------------------------------------------------------

    @Slot(object)
    def load(self, request: LoadRequest) -> None:
        previous = (self._target, self._draft)
        try:
            target, draft = self._resolve(request)
            self._apply(target, draft, request.ticket)
        except Exception as exc:
            cancelled = isinstance(exc, Cancelled) or request.ticket.cancelled
            message = "Model loading cancelled." if cancelled else describe(exc)
            self._restore(*previous, failed=exc)
            self.loadFailed.emit(LoadFailure(message, cancelled, self._state()))
            return
        self.modelsLoaded.emit(self._state())

    def _resolve(self, request: LoadRequest) -> tuple[ModelConfig, DraftChoice]:
        if request.target is not None:
            return request.target, request.draft or DraftChoice("none")
        demo = self._demo or self._prepare_demo(request.ticket, request.demo_folder)
        target = replace(request.demo_target, path=str(demo.f32))
        draft = request.draft or DraftChoice(
            "model", replace(request.demo_draft, path=str(demo.q4_1))
        )
        return target, draft

    def _prepare_demo(self, ticket: LoadTicket, folder: Path | None) -> DemoModels:
        def progress(done: int, total: int, message: str) -> None:
            if ticket.cancelled:  # e.g. the window closes during the first run's derivation
                raise Cancelled("model loading cancelled")
            self.loadProgress.emit(message[0].upper() + message[1:], done / max(total, 1))

        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        demo = ensure_demo_models(progress, folder=folder)
        if ticket.cancelled:
            raise Cancelled("model loading cancelled")
        self._demo = demo
        return demo

    def _use_runtime(self, *, remote: bool) -> None:
        """Hold the runtime kind these models need, the other one's models freed first."""
        if remote == self._remote:
            return
        if self._remote:
            self._runtime.close()  # ends the child process and its worker connections
        else:
            self._runtime.unload()
        self._target, self._draft = None, DraftChoice("none")
        self._runtime = self._new_remote() if remote else self._local
        self._remote = remote
        # The same runner (the local server holds it, with its counters) serves the new one.
        self.jobs.use_runtime(self._runtime)

    def _apply(self, target: ModelConfig, draft: DraftChoice, ticket: LoadTicket) -> None:
        """Load what differs from what is held: the target first, then the draft."""
        draft_workers = draft.config.rpc_servers if draft.config is not None else ()
        self._use_runtime(remote=bool(target.rpc_servers or draft_workers))
        if target != self._target or self._runtime.target_facts is None:
            # Forget the draft too: it was vetted against the old target. The chat's token
            # ids were the old target's.
            self._target, self._draft = None, DraftChoice("none")
            self._chat_tokens = []
            # A file llama.cpp would abort on is refused in words before it can take the
            # window down (checked once per file, in a child process; cached).
            self._check_file(target.path)
            self._runtime.load_target(target, self._progress(target.path, ticket, "target"))
            self._target = target
        if draft != self._draft:
            self._draft = DraftChoice("none")
            if draft.kind == "model" and draft.config is not None:
                self._check_file(draft.config.path)
                self._runtime.load_draft(
                    draft.config, self._progress(draft.config.path, ticket, "draft")
                )
            elif draft.kind == "ngram":
                self._runtime.use_suffix_index()
            else:
                self._runtime.clear_draft()
            self._draft = draft

    def _progress(self, path: str, ticket: LoadTicket, role: str) -> _Progress:
        return _Progress(self, f"Loading {role} {Path(path).name}", ticket)

    def _restore(
        self, target: ModelConfig | None, draft: DraftChoice, *, failed: BaseException
    ) -> None:
        """After a failed load, get back to the previous models so the app keeps working."""
        if isinstance(failed, DraftIncompatibleError) or self._target == target:
            # The target is still the previous one (only the draft failed): keep it, no draft.
            self._runtime.clear_draft()
            self._draft = DraftChoice("none")
            if self._target == target and draft.kind != "none":
                self._try_apply(target, draft)
            return
        self._runtime.unload()
        self._target, self._draft = None, DraftChoice("none")
        if target is not None:
            self._try_apply(target, draft)

    def _try_apply(self, target: ModelConfig | None, draft: DraftChoice) -> None:
        if target is None:
            return
        try:
            self._apply(target, draft, LoadTicket())
        except Exception as exc:
            log.warning("could not restore the previous models: %s", describe(exc))

    def _state(self) -> LoadedState:
        try:
            memory = self._runtime.memory()
            workers = (
                tuple(self._runtime.worker_memory())
                if isinstance(self._runtime, IsolatedRuntime)
                else ()
            )
        except SpecChatError as exc:  # the child died as it was asked
            log.warning("could not read the models' memory: %s", describe(exc))
            memory, workers = _NO_MEMORY, ()
        if self._runtime.target_facts is None:  # none loaded, or the child died as it was asked
            return LoadedState(None, DraftChoice("none"), _NO_MEMORY, self._demo)
        try:
            dialect = self._runtime.tool_dialect()
        except SpecChatError:
            dialect = DESCRIBED
        return LoadedState(self._target, self._draft, memory, self._demo, workers, dialect)

    def _check_lost(self) -> None:
        """After a failed reply: if the models went with it (an RPC worker died), say so."""
        if self._target is not None and self._runtime.target_facts is None:
            self._target, self._draft = None, DraftChoice("none")
            self.modelsLost.emit(self._state())

    # -- generating ---------------------------------------------------------------------------

    @Slot(object)
    def generate(self, request: GenerateRequest) -> None:
        try:
            job = Job(request.config, messages=request.messages)
            prompt_ids, events = job_events(self._runtime, job, request.control)
            for event in events:
                if isinstance(event, TokenEvent):
                    self.tokenReceived.emit(event)
                elif isinstance(event, RoundEvent):
                    self.roundReceived.emit(event.record)
                elif isinstance(event, NoticeEvent):
                    self.noticeReceived.emit(event.message)
                elif isinstance(event, FinishEvent):
                    self._chat_tokens = [*prompt_ids, *event.result.token_ids]
                    self.generationFinished.emit(event.result)
        except Exception as exc:
            self.generationFailed.emit(GenerationFailure(request.request_id, describe(exc)))
            self._check_lost()

    @Slot(object)
    def serve(self, request: ServeRequest) -> None:
        """Answer one local server request; the chat's replies and these take turns."""

        def sink(event: OwnerEvent) -> None:
            if isinstance(event, RoundEvent):
                self.serveRound.emit(event.record)
            elif isinstance(event, FinishEvent):
                self.serveEnded.emit(event.result)
            elif isinstance(event, Failed):
                self.serveEnded.emit(None)
            request.sink(event)

        self.serveStarted.emit()
        self._served += 1
        self.jobs.run(request.job, sink, request.ticket, closed=request.closed())
        self._check_lost()
        # The request took the models' caches; read the chat back into them once requests
        # pause, so the next reply does not re-read the whole conversation before its first
        # token. A request that comes first makes the read-back moot.
        QTimer.singleShot(_CHAT_RESTORE_DELAY_MS, self, partial(self._restore_chat, self._served))

    def _restore_chat(self, served: int) -> None:
        runtime, tokens = self._runtime, self._chat_tokens
        if served != self._served or len(tokens) < 2 or not isinstance(runtime, Runtime):
            return
        if runtime.target is None or runtime.target.tokens == tokens[:-1]:
            return
        try:
            runtime.target.feed(tokens[:-1], 0)
            if runtime.drafter is not None:
                runtime.drafter.prefill(tokens[:-1])
        except Exception as exc:  # the next reply reads the chat itself, as it would have
            log.warning("could not read the chat back after a server request: %s", exc)

    @Slot(object)
    def run_task(self, task: RuntimeTask) -> None:
        """Run work that needs the loaded models (the Compare benchmark) on this thread."""
        try:
            task(self._runtime)
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
        self._runtime.close()
        if self._runtime is not self._local:
            self._local.close()
        self._target, self._draft = None, DraftChoice("none")
        self.shutDown.emit()
        thread = self.thread()
        thread.quit()


_NO_MEMORY = MemoryUsage(0, 0, 0, 0, 0, 0)


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


class _Progress:
    """The load progress callback: throttled signals out, the cancel flag in."""

    def __init__(self, worker: EngineWorker, stage: str, ticket: LoadTicket) -> None:
        self._worker = worker
        self._stage = stage
        self._ticket = ticket
        self._last = -1.0

    def __call__(self, fraction: float) -> bool:
        # llama.cpp calls this per tensor; a signal per percent is plenty for a progress bar.
        if fraction - self._last >= 0.01 or fraction >= 1.0:
            self._last = fraction
            self._worker.loadProgress.emit(self._stage, fraction)
        return not self._ticket.cancelled


def _stored_chats(tokenize: Callable[[str], Sequence[int]]) -> Iterator[Sequence[int]]:
    """The stored chats as token ids, read on the engine thread through a connection of its
    own; a history that cannot be read leaves the index empty, never the load failed."""
    try:
        store = ConversationStore(database_path())
    except (StoreError, OSError) as exc:
        log.warning("the past-chats index starts empty: %s", exc)
        return
    try:
        yield from stored_documents(store, tokenize)
    except (StoreError, OSError) as exc:
        log.warning("the past-chats index was rebuilt from part of the history: %s", exc)
    finally:
        store.close()


def forget_history(runtime: EngineSession) -> None:
    """A RuntimeTask: rebuild the past-chats index from the chats that remain."""
    if isinstance(runtime, Runtime):
        runtime.forget_history()
