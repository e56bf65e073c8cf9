"""The UI thread's side of the engine: the one thread that owns the models, and its handle."""

from __future__ import annotations

import logging
from typing import Unpack

from PySide6.QtCore import QObject, Qt, QThread, Signal

from app.engine.model_host import LoadRequest
from ui.workers.engine import EngineOptions, EngineWorker
from ui.workers.requests import GenerateRequest, RuntimeTask

log = logging.getLogger(__name__)


class EngineHost(QObject):
    """The UI thread's handle on the worker: starts its thread, forwards requests, stops it.

    Signals:
        loadRequested(LoadRequest), generateRequested(GenerateRequest),
        serveRequested(WaitList): a local server request waits there (its oldest is taken),
        taskRequested(RuntimeTask), shutdownRequested().
    """

    loadRequested = Signal(object)
    generateRequested = Signal(object)
    serveRequested = Signal(object)
    taskRequested = Signal(object)
    shutdownRequested = Signal()

    def __init__(self, parent: QObject | None = None, **options: Unpack[EngineOptions]) -> None:
        super().__init__(parent)
        self.engine_thread = QThread()
        self.engine_thread.setObjectName("engine")
        # No parent: a QObject with a parent cannot move to another thread.
        self.worker = EngineWorker(**options)
        self.worker.moveToThread(self.engine_thread)
        queued = Qt.ConnectionType.QueuedConnection
        self.loadRequested.connect(self.worker.load, queued)
        self.generateRequested.connect(self.worker.generate, queued)
        self.serveRequested.connect(self.worker.serve, queued)
        self.taskRequested.connect(self.worker.run_task, queued)
        self.shutdownRequested.connect(self.worker.shutdown, queued)
        self.engine_thread.started.connect(self.worker.lower_priority, queued)
        self.engine_thread.start()
        self._stopped = False

    def request_load(self, request: LoadRequest) -> None:
        self.loadRequested.emit(request)

    def request_generate(self, request: GenerateRequest) -> None:
        self.generateRequested.emit(request)

    def request_task(self, task: RuntimeTask) -> None:
        """Queue work for the engine thread; it runs after what is queued before it."""
        self.taskRequested.emit(task)

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
