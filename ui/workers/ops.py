"""Background jobs that are not inference (reading GGUF headers, checking compatibility).

`OpRunner.run(op, on_success, on_failure)` runs `op` on a one-thread pool and calls the callback
on the UI thread. Never touch widgets inside `op`: it runs on the pool thread.

`run_in_process` is for pure-Python work that holds the GIL for long stretches (GGUF header
parsing): a thread would stall the UI thread's event loop by 100 ms and more, a helper process
cannot. `op` must then be picklable (a module-level function or a partial of one) and its
module must not import Qt. The process is started on first use and kept for later jobs.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Qt, QThreadPool, Signal, Slot

from ui.workers.helper_process import init_helper

log = logging.getLogger(__name__)

# Background work: a lower priority, so the window wins the CPU on a busy machine.
HELPER_NICE = 10

Success = Callable[[Any], None]
Failure = Callable[[Exception], None]


@dataclass(frozen=True, slots=True)
class _Outcome:
    result: Any
    error: Exception | None


class OpRunner(QObject):
    """Runs plain-Python jobs off the UI thread; callbacks arrive on the UI thread."""

    # One object per outcome, never a bare None: PySide 6 on Python 3.11 miscounts references
    # to None passed through a queued `object` argument (fatal "none_dealloc" at exit).
    _finished = Signal(int, object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(1)
        self._ids = itertools.count()
        self._pending: dict[int, tuple[Success, Failure | None]] = {}
        # Queued: the signal is emitted on the pool thread, the slot must run on ours.
        self._finished.connect(self._on_finished, Qt.ConnectionType.QueuedConnection)
        self._process_pool: ProcessPoolExecutor | None = None
        self._closed = False  # after shutdown, late requests are dropped, not run half-way

    def run(
        self, op: Callable[[], Any], on_success: Success, on_failure: Failure | None = None
    ) -> None:
        if self._closed:
            return
        op_id = next(self._ids)
        self._pending[op_id] = (on_success, on_failure)

        def job() -> None:
            try:
                result = op()
            except Exception as exc:
                self._finished.emit(op_id, _Outcome(None, exc))
                return
            self._finished.emit(op_id, _Outcome(result, None))

        self._pool.start(job)

    def run_in_process(
        self, op: Callable[[], Any], on_success: Success, on_failure: Failure | None = None
    ) -> None:
        if self._closed:
            return
        op_id = next(self._ids)
        self._pending[op_id] = (on_success, on_failure)
        if self._process_pool is None:
            # spawn, never fork: forking a process that runs Qt and llama.cpp threads is unsafe.
            self._process_pool = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=init_helper,
                initargs=(HELPER_NICE,),
            )
        future = self._process_pool.submit(op)

        def done(f: Future[Any]) -> None:
            # Runs on the executor's thread; the signal carries the outcome to the UI thread.
            error = f.exception() if not f.cancelled() else None
            if f.cancelled():
                return
            if error is not None:
                self._finished.emit(op_id, _Outcome(None, _as_exception(error)))
            else:
                self._finished.emit(op_id, _Outcome(f.result(), None))

        future.add_done_callback(done)

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    @Slot(int, object)
    def _on_finished(self, op_id: int, outcome: _Outcome) -> None:
        callbacks = self._pending.pop(op_id, None)
        if callbacks is None:
            return
        on_success, on_failure = callbacks
        if outcome.error is None:
            on_success(outcome.result)
        elif on_failure is not None:
            on_failure(outcome.error)
        else:
            log.error("background job failed", exc_info=outcome.error)

    def shutdown(self, timeout_ms: int = 10000) -> None:
        self._closed = True
        self._pending.clear()
        self._pool.clear()
        self._pool.waitForDone(timeout_ms)
        if self._process_pool is not None:
            self._process_pool.shutdown(wait=True, cancel_futures=True)
            self._process_pool = None


def _as_exception(error: BaseException) -> Exception:
    return error if isinstance(error, Exception) else RuntimeError(str(error))
