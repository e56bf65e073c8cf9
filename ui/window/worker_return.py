"""Waiting for RPC workers that took the models down with them to answer again.

llama.cpp drops every model of a client whose worker stops answering. `specchat serve` loads
them again by itself (app/engine/job_queue.py's RuntimeOwner); the window does the same, but
asks the workers first rather than loading blind every few seconds, since a load that fails
would tell the user so each time. Each try is a connect (and, for a keyed worker, the check
that it is free, without taking it), on a Jobs thread: a host that does not answer must not
stall the window.
"""

# Qt signals keep Qt's camelCase, like Qt's own.

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from app.engine.job_queue import RELOAD_RETRY_S
from app.engine.model_host import LoadedState
from app.errors import SpecChatError
from app.llama import rpc
from ui.workers.jobs import Job, Jobs

WAITING_FOR_WORKERS = "The models load again by themselves as soon as the RPC workers answer."
WORKERS_BACK = "The RPC workers answer again: loading the models."

# Short beside rpc.CONNECT_TIMEOUT_S: the window's one background thread waits for it.
PROBE_TIMEOUT_S = 2.0

Probe = Callable[[str, float], None]
"""probe(endpoint, timeout): returns when the worker answers, raises SpecChatError or OSError
when it does not."""


def workers_of(state: LoadedState[Any]) -> tuple[str, ...]:
    """The workers the held models are on, the target's first."""
    target = state.target.rpc_servers if state.target is not None else ()
    draft = state.draft.config.rpc_servers if state.draft.config is not None else ()
    return tuple(dict.fromkeys((*target, *draft)))


class WorkerReturnWatch(QObject):
    """Signals:
    answered(): every watched worker answers again (once per watch(); watching then stops).
    """

    answered = Signal()

    def __init__(
        self,
        ops: Jobs,
        *,
        probe: Probe = rpc.check_reachable,
        interval_s: float | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._ops = ops
        self._probe = probe
        self._endpoints: tuple[str, ...] = ()
        self._job: Job | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(round((interval_s or RELOAD_RETRY_S) * 1000))
        self._timer.timeout.connect(self._try)

    @property
    def watching(self) -> tuple[str, ...]:
        return self._endpoints

    def watch(self, endpoints: Sequence[str]) -> None:
        """Ask the endpoints every interval until all answer (at once for the first time)."""
        self.stop()
        self._endpoints = tuple(endpoints)
        if self._endpoints:
            self._try()

    def stop(self) -> None:
        self._endpoints = ()
        self._timer.stop()
        if self._job is not None:
            self._ops.cancel(self._job)
            self._job = None

    def _try(self) -> None:
        endpoints, probe = self._endpoints, self._probe

        def ask(job: Job) -> bool:
            for endpoint in endpoints:
                if job.cancelled:
                    return False
                try:
                    probe(endpoint, PROBE_TIMEOUT_S)
                except (SpecChatError, OSError):
                    return False
            return True

        def done(value: object) -> None:
            self._job = None
            if endpoints != self._endpoints:  # stopped, or watching others since
                return
            if value is True:
                self._endpoints = ()
                self.answered.emit()
            else:
                self._timer.start()

        self._job = self._ops.submit(ask, done, lambda _error: done(False))
