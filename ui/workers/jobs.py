"""Background jobs for the Models dialog: work on a QThreadPool, answers on the UI thread.

`Jobs` runs a plain function on a pool thread and delivers its result, its error or its progress
reports to callbacks on the thread that owns it, through queued signals, so no widget is ever
touched from a pool thread. `ThrottledProgress` thins out the Hub's download progress so the UI
thread is not flooded. Nothing here touches a widget.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Qt, QThreadPool, Signal, Slot

from models.hub import DownloadProgress

_PROGRESS_INTERVAL_S = 0.1  # at most ten progress updates a second reach the UI thread


@dataclass(frozen=True, slots=True)
class _Outcome:
    # Always an object, never a bare None through a queued `object` argument: PySide 6 on
    # Python 3.11 miscounts references to None sent that way.
    value: Any
    error: BaseException | None


Report = Callable[[object], None]
Work = Callable[[Report], object]


class Jobs(QObject):
    """Runs `work(report)` on a pool thread; results and reports arrive on the UI thread."""

    _finished = Signal(int, object)
    _reported = Signal(int, object)

    def __init__(self, pool: QThreadPool, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pool = pool
        self._ids = itertools.count(1)
        self._callbacks: dict[
            int, tuple[Callable[[Any], None], Callable[[BaseException], None], Report | None]
        ] = {}
        # Queued: both signals are emitted on pool threads and their slots must run on ours.
        self._finished.connect(self._on_finished, Qt.ConnectionType.QueuedConnection)
        self._reported.connect(self._on_reported, Qt.ConnectionType.QueuedConnection)

    @property
    def running(self) -> int:
        return len(self._callbacks)

    def submit(
        self,
        work: Work,
        on_done: Callable[[Any], None],
        on_error: Callable[[BaseException], None],
        on_report: Report | None = None,
    ) -> int:
        job_id = next(self._ids)
        self._callbacks[job_id] = (on_done, on_error, on_report)
        finished, reported = self._finished, self._reported

        def report(value: object) -> None:
            reported.emit(job_id, _Outcome(value, None))

        def run() -> None:
            try:
                value = work(report)
            except BaseException as exc:  # handed to the UI thread, which decides what to show
                finished.emit(job_id, _Outcome(None, exc))
                return
            finished.emit(job_id, _Outcome(value, None))

        self._pool.start(run)
        return job_id

    def forget(self) -> None:
        """Drop every pending callback: late results of a closing dialog go nowhere."""
        self._callbacks.clear()

    @Slot(int, object)
    def _on_finished(self, job_id: int, outcome: _Outcome) -> None:
        callbacks = self._callbacks.pop(job_id, None)
        if callbacks is None:
            return
        on_done, on_error, _ = callbacks
        if outcome.error is None:
            on_done(outcome.value)
        else:
            on_error(outcome.error)

    @Slot(int, object)
    def _on_reported(self, job_id: int, outcome: _Outcome) -> None:
        callbacks = self._callbacks.get(job_id)
        if callbacks is not None and callbacks[2] is not None:
            callbacks[2](outcome.value)


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
