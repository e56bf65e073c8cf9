"""A comparison in progress, wherever it runs: on the window's engine thread, or a thread of
its own for a benchmark that is not tied to the window's models.

The Compare dialog starts one through a CompareSource and hears back through a
CompareListener, whose calls come from the thread that runs the comparison (the dialog turns
them into queued signals), as a chat reply's events do. Nothing waits on a timer: a Stop before
the comparison started ends it at once, and closing waits only for one that did start.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from app.bench.run import ProgressFn
from app.bench.session import BenchCallable, PartialFn
from app.bench.summary import BenchReport
from app.engine.control import GenerationControl


@dataclass(frozen=True, slots=True)
class CompareListener:
    """Where a comparison's progress, finished draft rows and end go."""

    progress: ProgressFn
    partial: PartialFn
    finished: Callable[[BenchReport], None]
    failed: Callable[[Exception], None]


class CompareRun:
    """One comparison: Stop, and the wait for its end."""

    def __init__(self, control: GenerationControl) -> None:
        self.control = control
        self._lock = threading.Lock()
        self._started = False
        self._abandoned = False
        self._ended = threading.Event()

    def deliver(self, bench: Callable[[], BenchReport], listener: CompareListener) -> None:
        """Run bench on the calling thread and tell listener how it ended; nothing if the
        comparison was stopped while it waited (behind a reply on the engine thread)."""
        with self._lock:
            if self._abandoned:
                return
            self._started = True
        try:
            listener.finished(bench())
        except Exception as exc:  # handed to the dialog, which says it in words
            listener.failed(exc)
        finally:
            self._ended.set()

    def stop(self) -> bool:
        """Stop between rounds; True when the comparison had not started and never will."""
        self.control.stop()
        with self._lock:
            if self._started:
                return False
            self._abandoned = True
        self._ended.set()
        return True

    def wait(self, timeout_ms: int) -> bool:
        """Block until the comparison has ended (closing, tests); True when it has."""
        return self._ended.wait(timeout_ms / 1000)


@runtime_checkable
class CompareSource(Protocol):
    def start(self, text: str, control: GenerationControl, listener: CompareListener) -> CompareRun:
        """Begin comparing on text; listener hears back from the thread that runs it."""
        ...


class ThreadCompare:
    """A CompareSource that runs a BenchCallable on a thread of its own."""

    def __init__(self, bench: BenchCallable) -> None:
        self._bench = bench

    def start(self, text: str, control: GenerationControl, listener: CompareListener) -> CompareRun:
        run = CompareRun(control)

        def bench() -> BenchReport:
            return self._bench(text, listener.progress, control, listener.partial)

        threading.Thread(
            target=run.deliver, args=(bench, listener), name="compare", daemon=True
        ).start()
        return run
