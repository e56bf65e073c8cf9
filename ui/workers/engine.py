"""The worker thread that owns the models; the only code in ui/ that calls llama.cpp.

EngineHost (UI thread) creates an EngineWorker, moves it into its own QThread and talks to it
only through queued signals: `…Requested` in, result signals out, each carrying plain immutable
data. Stop and cancel cannot wait in the worker's queue behind the very generation or load they
interrupt, so they are flags (GenerationControl, LoadTicket) the UI thread sets directly and the
engine reads between rounds or in the load progress callback.
"""

# Qt signals keep Qt's camelCase (…Requested, …Changed), as architecture.md names them.

from __future__ import annotations

import logging
import os
import sys
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot

from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig, ModelConfig
from app.engine.control import GenerationControl
from app.engine.events import FinishEvent, NoticeEvent, RoundEvent, TokenEvent
from app.engine.runtime import MemoryUsage, Runtime
from app.errors import Cancelled, DraftIncompatibleError
from models.compat import check_draft_file
from models.demo import DemoModels, ensure_demo_models
from ui.messages import describe

log = logging.getLogger(__name__)

# Nice increment of the engine thread relative to the UI thread (see lower_priority).
ENGINE_NICE = 5

DraftKind = Literal["none", "ngram", "model"]


class LoadTicket:
    """Cancels one load request; set from the UI thread, read by the loading thread."""

    def __init__(self) -> None:
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()


@dataclass(frozen=True, slots=True)
class DraftChoice:
    kind: DraftKind
    config: ModelConfig | None = None

    @property
    def path(self) -> str | None:
        return self.config.path if self.config else None


@dataclass(frozen=True, slots=True)
class LoadRequest:
    """Make the worker hold this target and draft. target None means the demo pair."""

    target: ModelConfig | None
    draft: DraftChoice | None  # None with a demo target means the demo's Q4_1 draft
    ticket: LoadTicket = field(default_factory=LoadTicket, compare=False)
    demo_folder: Path | None = None  # where demo files are derived; None = the default
    # Settings for the demo pair (their paths are filled in once the demo files exist).
    demo_target: ModelConfig = field(default_factory=lambda: ModelConfig(""))
    demo_draft: ModelConfig = field(default_factory=lambda: ModelConfig(""))


@dataclass(frozen=True, slots=True)
class LoadedState:
    """What the worker holds now; sent after every load, failed or not."""

    target: ModelConfig | None
    draft: DraftChoice
    memory: MemoryUsage
    demo: DemoModels | None


@dataclass(frozen=True, slots=True)
class LoadFailure:
    message: str
    cancelled: bool
    state: LoadedState


@dataclass(frozen=True, slots=True)
class GenerateRequest:
    request_id: int
    messages: tuple[ChatMessage, ...]
    config: GenerationConfig
    control: GenerationControl
    speculative: bool


@dataclass(frozen=True, slots=True)
class GenerationFailure:
    request_id: int
    message: str


class EngineWorker(QObject):
    """Owns the Runtime. Lives in the engine thread; every slot runs there.

    Signals:
        loadProgress(str, float): stage text and 0..1 while preparing or loading models.
        modelsLoaded(LoadedState): a load request finished and these models are held.
        loadFailed(LoadFailure): a load failed or was cancelled; `state` is what is held now.
        tokenReceived(TokenEvent), roundReceived(RoundRecord), noticeReceived(str):
            a generation's stream, in order.
        generationFinished(GenerationResult), generationFailed(GenerationFailure).
        shutDown(): the models are freed; the thread is about to end.
    """

    loadProgress = Signal(str, float)
    modelsLoaded = Signal(object)
    loadFailed = Signal(object)
    tokenReceived = Signal(object)
    roundReceived = Signal(object)
    noticeReceived = Signal(str)
    generationFinished = Signal(object)
    generationFailed = Signal(object)
    shutDown = Signal()

    def __init__(self) -> None:
        super().__init__()
        self._runtime = Runtime(vet_draft=check_draft_file)
        self._target: ModelConfig | None = None
        self._draft = DraftChoice("none")
        self._demo: DemoModels | None = None

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

    def _apply(self, target: ModelConfig, draft: DraftChoice, ticket: LoadTicket) -> None:
        """Load what differs from what is held: the target first, then the draft."""
        if target != self._target or self._runtime.target is None:
            # Forget the draft too: it was vetted against the old target.
            self._target, self._draft = None, DraftChoice("none")
            self._runtime.load_target(target, self._progress(target.path, ticket, "target"))
            self._target = target
        if draft != self._draft:
            self._draft = DraftChoice("none")
            if draft.kind == "model" and draft.config is not None:
                self._runtime.load_draft(
                    draft.config, self._progress(draft.config.path, ticket, "draft")
                )
            elif draft.kind == "ngram":
                self._runtime.use_prompt_lookup()
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
        target = self._target if self._runtime.target is not None else None
        return LoadedState(target, self._draft, self._runtime.memory(), self._demo)

    # -- generating ---------------------------------------------------------------------------

    @Slot(object)
    def generate(self, request: GenerateRequest) -> None:
        try:
            prompt_ids = self._runtime.chat_prompt(list(request.messages))
            events = self._runtime.generate(
                prompt_ids,
                request.config,
                request.control,
                speculative=request.speculative and self._runtime.drafter is not None,
            )
            for event in events:
                if isinstance(event, TokenEvent):
                    self.tokenReceived.emit(event)
                elif isinstance(event, RoundEvent):
                    self.roundReceived.emit(event.record)
                elif isinstance(event, NoticeEvent):
                    self.noticeReceived.emit(event.message)
                elif isinstance(event, FinishEvent):
                    self.generationFinished.emit(event.result)
        except Exception as exc:
            self.generationFailed.emit(GenerationFailure(request.request_id, describe(exc)))

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
        self._target, self._draft = None, DraftChoice("none")
        self.shutDown.emit()
        thread = self.thread()
        thread.quit()


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


class EngineHost(QObject):
    """The UI thread's handle on the worker: starts its thread, forwards requests, stops it.

    Signals:
        loadRequested(LoadRequest), generateRequested(GenerateRequest), shutdownRequested().
    """

    loadRequested = Signal(object)
    generateRequested = Signal(object)
    shutdownRequested = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine_thread = QThread()
        self.engine_thread.setObjectName("engine")
        # No parent: a QObject with a parent cannot move to another thread.
        self.worker = EngineWorker()
        self.worker.moveToThread(self.engine_thread)
        queued = Qt.ConnectionType.QueuedConnection
        self.loadRequested.connect(self.worker.load, queued)
        self.generateRequested.connect(self.worker.generate, queued)
        self.shutdownRequested.connect(self.worker.shutdown, queued)
        self.engine_thread.started.connect(self.worker.lower_priority, queued)
        self.engine_thread.start()
        self._stopped = False

    def request_load(self, request: LoadRequest) -> None:
        self.loadRequested.emit(request)

    def request_generate(self, request: GenerateRequest) -> None:
        self.generateRequested.emit(request)

    def stop(self, timeout_ms: int = 15000) -> bool:
        """Free the models on the worker thread and end it; True if it ended in time.

        Callers stop any running generation or load first (their flags), so the shutdown
        request is next in the worker's queue within one round.
        """
        if self._stopped:
            return True
        self._stopped = True
        self.shutdownRequested.emit()
        finished = self.engine_thread.wait(timeout_ms)
        if not finished:
            log.error("the engine thread did not stop within %d ms", timeout_ms)
        return bool(finished)
