"""The one owner of the models: a thread that runs queued requests in order on one Runtime.

The seam. The HTTP layer talks to an `EngineOwner` only: `submit(job, sink)` queues a job and
returns a `Ticket`; the owner later calls `sink` from its own thread with `Started` (or
`Failed`), then the engine's events (TokenEvent, RoundEvent, NoticeEvent) and a FinishEvent;
`Ticket.cancel()` stops the job between engine rounds; a job still queued leaves the queue at
once, and its sink hears `Failed` (kind "cancelled") then, on the thread that cancelled it, as
the waiting jobs do when the owner stops: nobody waits for the owner thread to reach a job that
will never run. Every other event comes from the owner's thread.
`drive` (app/engine/job_driver.py) is the one way a job runs; `WaitList` is the one bounded queue.
`RuntimeOwner` is the headless owner used by `specchat serve`; a window that serves its own
loaded models takes the same WaitList's jobs on its engine worker thread, so one process
never holds two copies of a model: one owner per model.

Each job carries its whole history; the target's cache keeps the longest common prefix with the
previous job (LlamaModel.feed), so a conversation that continues pays only for its new tokens.
A full queue refuses new jobs (QueueFullError) instead of growing without bound.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from app.engine.events import FinishEvent
from app.engine.job_driver import (
    Failed,
    Job,
    Outcome,
    OwnerEvent,
    Sink,
    Ticket,
    deliver,
    drive,
    outcome_of,
)
from app.engine.session import EngineSession
from app.errors import SpecChatError, user_message
from app.llama.facts import MemoryUsage

log = logging.getLogger(__name__)

DEFAULT_QUEUE_SIZE = 8
# How often models lost with an RPC worker are tried again while no request comes.
RELOAD_RETRY_S = 5.0


class QueueFullError(SpecChatError):
    """Too many requests are waiting; the client should retry later."""


class EngineOwner(Protocol):
    def submit(self, job: Job, sink: Sink) -> Ticket:
        """Queue a job; raises QueueFullError when the queue is full."""
        ...

    def health(self) -> dict[str, Any]:
        """Counters for GET /health: requests served, cancelled, waiting..."""
        ...

    @property
    def stopping(self) -> bool:
        """Whether the server is shutting down: the owner takes no more jobs."""
        ...


@dataclass(frozen=True, slots=True)
class CancelRecord:
    """How one cancelled job stopped: engine rounds and seconds after cancel() was called."""

    job_id: int
    reason: str
    rounds_before_cancel: int
    rounds_after_cancel: int
    seconds_after_cancel: float


@dataclass(slots=True)
class OwnerStats:
    """What GET /health reports of the jobs, in its order."""

    running: bool = False
    served: int = 0
    cancelled: int = 0
    invalid: int = 0  # refused for what they asked: the client's to fix (job_driver.Outcome)
    failed: int = 0
    rejected: int = 0
    last_cancel: CancelRecord | None = None
    # What the models hold, read after each job on the thread that runs them (the saved
    # conversations grow with every reply); None until read, or when the models cannot answer.
    memory: MemoryUsage | None = None
    # Why no model can answer now (an RPC worker stopped answering and is not back), or None.
    unavailable: str | None = None


class JobRunner:
    """Runs one job at a time on a Runtime and keeps the counters /health reports.

    Called on whichever thread owns the models: RuntimeOwner's own thread for `specchat
    serve`, the window's engine worker thread when the window serves its loaded models.
    """

    def __init__(self, runtime: EngineSession) -> None:
        self._runtime = runtime
        self._lock = threading.Lock()
        self._stats = OwnerStats()

    def use_runtime(self, runtime: EngineSession) -> None:
        """Serve the next jobs on this runtime (the window switched between local models and
        models on RPC workers); called on the thread that runs the jobs, so never mid-job."""
        self._runtime = runtime

    def run(self, job: Job, sink: Sink, ticket: Ticket) -> None:
        """Serve one job to the end and count how it ended.

        Counted as its last event (FinishEvent or Failed) is handed on, not when drive returns:
        the engine goes on after the reply's end (it saves the conversation for the next one),
        and a client that reads /health as soon as it has its reply must find it counted."""
        counted = False

        def count_at_the_end(event: OwnerEvent) -> None:
            nonlocal counted
            if not counted and isinstance(event, FinishEvent | Failed):
                counted = True
                self._end(outcome_of(event, ticket), ticket)
            sink(event)

        with self._lock:
            self._stats.running = True
        try:
            outcome = drive(self._runtime, job, count_at_the_end, ticket)
        finally:
            ticket.finish()
            if not counted:
                with self._lock:
                    self._stats.running = False
        if not counted:  # drive always ends with one of them; this only keeps the count whole
            self._end(outcome, ticket)

    def _end(self, outcome: Outcome, ticket: Ticket) -> None:
        with self._lock:
            self._stats.running = False
        self._record(outcome, ticket)

    def read_memory(self) -> None:
        """Note what the models hold now; on the thread that runs the jobs."""
        try:
            memory: MemoryUsage | None = self._runtime.memory()
        except SpecChatError:  # the child died: the next request says so
            memory = None
        self.note_memory(memory)

    def note_memory(self, memory: MemoryUsage | None) -> None:
        """Report `memory` in health(): for an owner that reads the models' memory anyway
        (the window's engine worker, after replies, requests and loads), so it is read once."""
        with self._lock:
            self._stats.memory = memory

    def count_withdrawn(self, ticket: Ticket) -> None:
        """A job cancelled while it waited, so it never reached run(): count it as cancelled."""
        self._record("cancelled", ticket)

    def reject(self) -> None:
        with self._lock:
            self._stats.rejected += 1

    def health(self) -> dict[str, Any]:
        with self._lock:
            health = asdict(self._stats)
        if health["unavailable"] is None:
            del health["unavailable"]
        return health

    def note_unavailable(self, reason: str | None) -> None:
        """Say in health() why no model can answer now (None: they can)."""
        with self._lock:
            self._stats.unavailable = reason

    def refuse(self, sink: Sink, ticket: Ticket, failure: Failed) -> None:
        """End a job that cannot run now with `failure`, counted as failed."""
        deliver(sink, ticket, failure)
        self._end("failed", ticket)

    def _record(self, outcome: Outcome, ticket: Ticket) -> None:
        with self._lock:
            if outcome == "served":
                self._stats.served += 1
            elif outcome == "failed":
                self._stats.failed += 1
            elif outcome == "invalid":
                self._stats.invalid += 1
            else:
                self._stats.cancelled += 1
                if ticket.rounds_at_cancel is not None and ticket.cancelled_at is not None:
                    record = CancelRecord(
                        ticket.job_id,
                        ticket.cancel_reason,
                        ticket.rounds_at_cancel,
                        ticket.rounds - ticket.rounds_at_cancel,
                        time.perf_counter() - ticket.cancelled_at,
                    )
                    self._stats.last_cancel = record
                    log.info(
                        "request %d cancelled (%s): stopped %d round(s), %.3f s later",
                        record.job_id,
                        record.reason,
                        record.rounds_after_cancel,
                        record.seconds_after_cancel,
                    )


Waiting = tuple[Job, Sink, Ticket]


class WaitList:
    """An EngineOwner's accepted jobs that have not started yet, oldest first, at most max_queue.

    Both owners are one: they differ only in how a waiting job reaches the thread that runs it.
    RuntimeOwner's thread blocks in take(); the window's worker is sent a queued signal per job
    and takes it when the signal arrives, after whatever the window queued before it.
    """

    def __init__(self, runner: JobRunner, *, max_queue: int = DEFAULT_QUEUE_SIZE) -> None:
        if max_queue < 1:
            raise ValueError("the queue must hold at least one request")
        self._runner = runner
        self._max_queue = max_queue
        self._ready = threading.Condition()
        self._waiting: deque[Waiting] = deque()
        self._next_id = 0
        self._closed = False
        # The last job taken: stop_accepting cancels it, whether it runs or is about to (a
        # finished ticket ignores the cancel).
        self._taken: Ticket | None = None

    # -- the caller's side (any thread) ---------------------------------------------------------

    def submit(self, job: Job, sink: Sink) -> Ticket:
        with self._ready:
            if self._closed:
                raise QueueFullError("the server is shutting down")
            if len(self._waiting) >= self._max_queue:
                self._runner.reject()
                raise QueueFullError(f"{self._max_queue} requests are already waiting; retry later")
            self._next_id += 1
            ticket = Ticket(self._next_id, on_cancel=self._withdraw)
            self._waiting.append((job, sink, ticket))
            self._ready.notify()
        return ticket

    def _withdraw(self, ticket: Ticket) -> None:
        """A ticket was cancelled (any thread): if its job still waits, it leaves the queue now,
        so its place is free for the next client and health() counts only live requests. A job
        already taken is the runner's to end (drive skips one cancelled before it starts)."""
        with self._ready:
            found = next((item for item in self._waiting if item[2] is ticket), None)
            if found is None:
                return
            self._waiting.remove(found)
        # Counted before its receiver hears the end, so /health agrees with what it was told.
        self._runner.count_withdrawn(ticket)
        deliver(found[1], ticket, Failed("cancelled before it started", "cancelled"))

    def health(self) -> dict[str, Any]:
        with self._ready:
            queued = len(self._waiting)
        return {**self._runner.health(), "queued": queued, "queue_size": self._max_queue}

    @property
    def stopping(self) -> bool:
        """Whether stop_accepting was called: the server that queues here is shutting down."""
        with self._ready:
            return self._closed

    def stop_accepting(self) -> None:
        """Refuse new jobs and cancel the running and waiting ones, so their replies end now."""
        with self._ready:
            self._closed = True
            waiting, self._waiting = self._waiting, deque()
            taken = self._taken
            self._ready.notify_all()
        if taken is not None:
            taken.cancel("server shutting down")
        for _job, sink, ticket in waiting:
            ticket.cancel("server shutting down")
            # Out of the queue already, so the cancel's own withdrawal found nothing to count.
            self._runner.count_withdrawn(ticket)
            deliver(sink, ticket, Failed("the server is shutting down", "cancelled"))

    # -- the thread that runs the jobs ----------------------------------------------------------

    def take(self, *, wait: bool) -> Waiting | None:
        """The oldest waiting job, to run now. None once stopped, or without `wait` when none
        waits (stop_accepting already told its receiver)."""
        with self._ready:
            while wait and not self._waiting and not self._closed:
                self._ready.wait()
            if not self._waiting:
                return None
            item = self._waiting.popleft()
            self._taken = item[2]
            return item


class RuntimeOwner(WaitList):
    """Owns a loaded Runtime from construction on; call close() to stop it and free the models.

    With `reload`, models an RPC worker took down with it (IsolatedRuntime drops them with its
    child) are loaded again: at once, then every RELOAD_RETRY_S while nothing waits and before
    each request, until the worker answers. Meanwhile requests are refused as unavailable (503)
    and health() says why, so a balancer sees the server come back without sending a request.
    """

    def __init__(
        self,
        runtime: EngineSession,
        *,
        max_queue: int = DEFAULT_QUEUE_SIZE,
        reload: Callable[[], None] | None = None,
    ) -> None:
        self._runtime = runtime
        self._reload = reload
        # Why the models cannot answer now (None: they can); `_whole` is False from a loss
        # until a reload has loaded every model (one that fails midway leaves the target only).
        self._down: str | None = None
        self._whole = True
        super().__init__(JobRunner(runtime), max_queue=max_queue)
        self._thread = threading.Thread(target=self._run, name="engine-owner", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Cancel the running and queued jobs, stop the thread, free the models."""
        self.stop_accepting()
        self._thread.join()
        self._runtime.close()

    def _run(self) -> None:
        self._runner.read_memory()
        while not self.stopping:
            if self._lost():
                self._load_again()
            if self._down is not None:
                self._await_work(RELOAD_RETRY_S)  # a request, or the time to try again
                item = self.take(wait=False)
                if item is None:
                    continue
            else:
                item = self.take(wait=True)
                if item is None:
                    break
            job, sink, ticket = item
            if self._down is None:
                self._runner.run(job, sink, ticket)
            else:
                message = f"no model can answer now: {self._down}"
                self._runner.refuse(sink, ticket, Failed(message, "unavailable"))
            self._runner.read_memory()
            if self._lost() and self._down is None:
                self._note_down("the models were lost with an RPC worker; loading them again")

    def _lost(self) -> bool:
        if self._reload is None:
            return False
        return not self._whole or self._runtime.target_facts is None

    def _load_again(self) -> None:
        assert self._reload is not None
        self._whole = False
        try:
            self._reload()
        except Exception as exc:  # whatever it is, the thread must serve on
            reason = user_message(exc) if isinstance(exc, SpecChatError) else str(exc)
            if reason != self._down:
                log.warning("could not load the models again: %s", reason)
            self._note_down(reason)
            return
        self._whole = True
        if self._down is not None:
            log.info("loaded the models again")
        self._note_down(None)

    def _note_down(self, reason: str | None) -> None:
        self._down = reason
        self._runner.note_unavailable(reason)

    def _await_work(self, timeout_s: float) -> None:
        with self._ready:
            if not self._waiting and not self._closed:
                self._ready.wait(timeout_s)
