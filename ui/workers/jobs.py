"""The one background-job helper of ui/: work off the UI thread, answers on the UI thread.

Everything that is not inference runs through `Jobs`: reading GGUF headers, judging drafts,
scanning folders, quantizing, Hub listings and downloads. (The engine worker stays apart: it
owns the loaded models and their thread, and runs replies and Compare.)

- `submit(work, on_done, on_error, on_report)` runs `work(job)` on a pool thread. `work` may call
  `job.report(value)` (progress, delivered to `on_report` on the UI thread) and should look at
  `job.cancelled` (or hand `job.cancel_event` to a library that takes one) to stop early.
- `run(op, on_done, on_error)` is the same for an `op()` that needs neither.
- `run_in_process(op, on_done, on_error)` is for pure-Python work that holds the GIL for long
  stretches (GGUF header parsing): a thread would stall the UI thread's event loop by 100 ms and
  more, a helper process cannot. `op` must then be picklable (a module-level function or a
  partial of one) and its module must not import Qt. The process starts on first use and is kept.

Callbacks run on the thread that owns the `Jobs` object, through queued signals, so no widget
is ever touched from a pool thread. `cancel(job)` asks the work to stop and drops its callbacks;
`forget()` drops every callback (a closing dialog's late answers go nowhere).
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Qt, QThreadPool, Signal, Slot

from models.hub import DownloadProgress
from ui.workers.helper_process import init_helper

log = logging.getLogger(__name__)

# Background work: a lower priority, so the window wins the CPU on a busy machine.
HELPER_NICE = 10
_PROGRESS_INTERVAL_S = 0.1  # at most ten progress updates a second reach the UI thread

Report = Callable[[object], None]
Done = Callable[[Any], None]
Failed = Callable[[Exception], None]


@dataclass(frozen=True, slots=True)
class _Outcome:
    # Always an object, never a bare None through a queued `object` argument: PySide 6 on
    # Python 3.11 miscounts references to None sent that way (fatal "none_dealloc" at exit).
    value: Any
    error: Exception | None


class Job:
    """One submitted piece of work: its id, its progress channel and its cancel flag."""

    def __init__(self, job_id: int, report: Report) -> None:
        self.id = job_id
        self.report = report
        self.cancel_event = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()


Work = Callable[[Job], object]


@dataclass(frozen=True, slots=True)
class _Callbacks:
    on_done: Done
    on_error: Failed | None
    on_report: Report | None
    job: Job | None


class Jobs(QObject):
    """Runs background work for one owner (the window, a dialog); answers on the owner's thread."""

    _finished = Signal(int, object)
    _reported = Signal(int, object)

    def __init__(self, parent: QObject | None = None, *, threads: int = 1) -> None:
        super().__init__(parent)
        # A child of this object: Qt deletes it with the relay, and its destructor waits for
        # running work, which may still emit through the relay's signals.
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(threads)
        self._ids = itertools.count(1)
        self._pending: dict[int, _Callbacks] = {}
        self._process_pool: ProcessPoolExecutor | None = None
        self._closed = False  # after shutdown, late requests are dropped, not run half-way
        # Queued: both signals are emitted on worker threads and their slots must run on ours.
        self._finished.connect(self._on_finished, Qt.ConnectionType.QueuedConnection)
        self._reported.connect(self._on_reported, Qt.ConnectionType.QueuedConnection)

    @property
    def running(self) -> int:
        """How many jobs have not yet answered."""
        return len(self._pending)

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def submit(
        self,
        work: Work,
        on_done: Done,
        on_error: Failed | None = None,
        on_report: Report | None = None,
    ) -> Job:
        job_id = next(self._ids)
        finished, reported = self._finished, self._reported

        def report(value: object) -> None:
            reported.emit(job_id, _Outcome(value, None))

        job = Job(job_id, report)
        if self._closed:
            job.cancel_event.set()
            return job
        self._pending[job_id] = _Callbacks(on_done, on_error, on_report, job)

        def run() -> None:
            try:
                value = work(job)
            except BaseException as exc:  # handed to the UI thread, which decides what to show
                finished.emit(job_id, _Outcome(None, _as_exception(exc)))
                return
            finished.emit(job_id, _Outcome(value, None))

        self._pool.start(run)
        return job

    def run(self, op: Callable[[], object], on_done: Done, on_error: Failed | None = None) -> Job:
        return self.submit(lambda _job: op(), on_done, on_error)

    def run_in_process(
        self, op: Callable[[], object], on_done: Done, on_error: Failed | None = None
    ) -> int:
        job_id = next(self._ids)
        if self._closed:
            return job_id
        self._pending[job_id] = _Callbacks(on_done, on_error, None, None)
        if self._process_pool is None:
            # spawn, never fork: forking a process that runs Qt and llama.cpp threads is unsafe.
            self._process_pool = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=init_helper,
                initargs=(HELPER_NICE,),
            )
        future = self._process_pool.submit(op)
        finished = self._finished

        def done(f: Future[Any]) -> None:
            # Runs on the executor's thread; the signal carries the outcome to the UI thread.
            if f.cancelled():
                return
            error = f.exception()
            if error is not None:
                finished.emit(job_id, _Outcome(None, _as_exception(error)))
            else:
                finished.emit(job_id, _Outcome(f.result(), None))

        future.add_done_callback(done)
        return job_id

    def cancel(self, job: Job) -> None:
        """Ask `job` to stop; whatever it answers later goes nowhere."""
        job.cancel_event.set()
        self._pending.pop(job.id, None)

    def forget(self) -> None:
        """Drop every pending callback and ask running work to stop."""
        for callbacks in self._pending.values():
            if callbacks.job is not None:
                callbacks.job.cancel_event.set()
        self._pending.clear()

    def wait(self, timeout_ms: int = 30_000) -> bool:
        """Block until the thread jobs have ended (closing, tests); True when they have."""
        return self._pool.waitForDone(timeout_ms)

    def shutdown(self, timeout_ms: int = 10_000) -> None:
        self._closed = True
        self.forget()
        self._pool.clear()
        self._pool.waitForDone(timeout_ms)
        if self._process_pool is not None:
            self._process_pool.shutdown(wait=True, cancel_futures=True)
            self._process_pool = None

    @Slot(int, object)
    def _on_finished(self, job_id: int, outcome: _Outcome) -> None:
        callbacks = self._pending.pop(job_id, None)
        if callbacks is None:
            return
        if outcome.error is None:
            callbacks.on_done(outcome.value)
        elif callbacks.on_error is not None:
            callbacks.on_error(outcome.error)
        else:
            log.error("background job failed", exc_info=outcome.error)

    @Slot(int, object)
    def _on_reported(self, job_id: int, outcome: _Outcome) -> None:
        callbacks = self._pending.get(job_id)
        if callbacks is not None and callbacks.on_report is not None:
            callbacks.on_report(outcome.value)


def _as_exception(error: BaseException) -> Exception:
    return error if isinstance(error, Exception) else RuntimeError(str(error) or repr(error))


class ThrottledProgress:
    """Hub progress callback (pool thread): passes phase changes and the end, else 10 a second."""

    def __init__(self, report: Report) -> None:
        self._report = report
        self._last = 0.0
        self._last_key: tuple[str, str] | None = None

    def __call__(self, event: DownloadProgress) -> None:
        now = time.monotonic()
        key = (event.filename, event.phase)
        if key == self._last_key and now - self._last < _PROGRESS_INTERVAL_S:
            return
        self._last, self._last_key = now, key
        self._report(event)
