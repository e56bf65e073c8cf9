"""The one owner of the models: a thread that runs queued requests in order on one Runtime.

The seam. The HTTP layer talks to an `EngineOwner` only: `submit(job, sink)` queues a job and
returns a `Ticket`; the owner later calls `sink` from its own thread with `Started` (or
`Failed`), then the engine's events (TokenEvent, RoundEvent, NoticeEvent) and a FinishEvent;
`Ticket.cancel()` stops the job between engine rounds, or before it starts if still queued.
`RuntimeOwner` is the headless implementation used by `specchat serve`. A window that serves
its own loaded models implements the same protocol on its engine worker thread (jobs arrive
through a queued signal; the sink is called there), so one process never holds two copies of
a model: one owner per model.

Each job carries its whole history; the target's cache keeps the longest common prefix with the
previous job (LlamaModel.feed), so a conversation that continues pays only for its new tokens.
A full queue refuses new jobs (QueueFullError) instead of growing without bound.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol

from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.events import Event, FinishEvent, RoundEvent
from app.engine.runtime import Runtime
from app.engine.session import EngineSession
from app.engine.tool_calls import ToolOffer
from app.errors import ContextOverflowError, SpecChatError, user_message
from app.metrics.rounds import DraftMode

log = logging.getLogger(__name__)

DEFAULT_QUEUE_SIZE = 8


@dataclass(frozen=True, slots=True)
class Job:
    """One reply to generate: a chat (messages) or a raw text prompt, with its settings."""

    config: GenerationConfig
    messages: tuple[ChatMessage, ...] | None = None
    prompt: str | None = None
    tools: ToolOffer | None = None  # functions a chat reply may call


@dataclass(frozen=True, slots=True)
class Started:
    """The job left the queue and its prompt fits; cached_tokens were reused from the cache."""

    prompt_tokens: int
    cached_tokens: int
    mode: DraftMode


FailureKind = Literal["invalid", "context", "cancelled", "internal"]


@dataclass(frozen=True, slots=True)
class Failed:
    """The job ended without a reply; `message` is one readable line."""

    message: str
    kind: FailureKind


OwnerEvent = Started | Failed | Event
Sink = Callable[[OwnerEvent], None]


class QueueFullError(SpecChatError):
    """Too many requests are waiting; the client should retry later."""


class Ticket:
    """A submitted job's handle: cancel it, and see how promptly the cancel took effect."""

    def __init__(self, job_id: int, clock: Callable[[], float] = time.perf_counter) -> None:
        self.job_id = job_id
        self.control = GenerationControl()
        self._clock = clock
        self._lock = threading.Lock()
        self._done = False
        self.rounds = 0
        # Engine rounds completed when cancel() came, and when the job finally stopped.
        self.rounds_at_cancel: int | None = None
        self.cancelled_at: float | None = None
        self.cancel_reason = ""

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop the job between rounds; a no-op once it has finished.

        reason says why in the server's log and /health, e.g. "client disconnected"."""
        with self._lock:
            if self._done or self.rounds_at_cancel is not None:
                return
            self.rounds_at_cancel = self.rounds
            self.cancelled_at = self._clock()
            self.cancel_reason = reason
        self.control.stop()

    @property
    def cancelled(self) -> bool:
        return self.rounds_at_cancel is not None

    def _count_round(self) -> None:
        with self._lock:
            self.rounds += 1

    def _finish(self) -> None:
        with self._lock:
            self._done = True


class EngineOwner(Protocol):
    def submit(self, job: Job, sink: Sink) -> Ticket:
        """Queue a job; raises QueueFullError when the queue is full."""
        ...

    def health(self) -> dict[str, Any]:
        """Counters for GET /health: requests served, cancelled, waiting..."""
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
    served: int = 0
    cancelled: int = 0
    failed: int = 0
    rejected: int = 0
    running: bool = False
    last_cancel: CancelRecord | None = None


class JobRunner:
    """Runs one job at a time on a Runtime and keeps the counters /health reports.

    Called on whichever thread owns the models: RuntimeOwner's own thread for `specchat
    serve`, the window's engine worker thread when the window serves its loaded models.
    """

    def __init__(self, runtime: EngineSession) -> None:
        self._runtime = runtime
        self._lock = threading.Lock()
        self._current: Ticket | None = None
        self._stats = OwnerStats()

    def use_runtime(self, runtime: EngineSession) -> None:
        """Serve the next jobs on this runtime (the window switched between local models and
        models on RPC workers); called on the thread that runs the jobs, so never mid-job."""
        self._runtime = runtime

    def run(self, job: Job, sink: Sink, ticket: Ticket, *, closed: bool = False) -> None:
        """Serve one job to the end. closed: the owner stopped accepting while it waited."""
        with self._lock:
            self._current = ticket
            self._stats.running = True
        if closed:
            ticket.cancel("server shutting down")
        try:
            outcome = self._serve(job, sink, ticket)
        finally:
            ticket._finish()
            with self._lock:
                self._current = None
                self._stats.running = False
        self._record(outcome, ticket)

    def cancel_current(self, reason: str) -> None:
        with self._lock:
            current = self._current
        if current is not None:
            current.cancel(reason)

    def reject(self) -> None:
        with self._lock:
            self._stats.rejected += 1

    def health(self) -> dict[str, Any]:
        with self._lock:
            stats = self._stats
            last = stats.last_cancel
            return {
                "running": stats.running,
                "served": stats.served,
                "cancelled": stats.cancelled,
                "failed": stats.failed,
                "rejected": stats.rejected,
                "last_cancel": None if last is None else asdict(last),
            }

    def _serve(self, job: Job, sink: Sink, ticket: Ticket) -> str:
        if ticket.cancelled:
            _deliver(sink, ticket, Failed("cancelled before it started", "cancelled"))
            return "cancelled"
        runtime = self._runtime
        try:
            prompt_ids, events = job_events(runtime, job, ticket.control)
            cached = _cached_prefix(runtime, prompt_ids)
            # The engine checks the prompt against the context before its first event, so a
            # refusal arrives here, before the client is told the job started.
            first = next(events)
        except ContextOverflowError as exc:
            _deliver(sink, ticket, Failed(user_message(exc), "context"))
            return "failed"
        except SpecChatError as exc:
            _deliver(sink, ticket, Failed(user_message(exc), "invalid"))
            return "failed"
        except Exception:
            log.exception("request %d failed", ticket.job_id)
            _deliver(sink, ticket, Failed("the engine failed; see the server log", "internal"))
            return "failed"
        mode: DraftMode = "plain" if job.config.gamma.is_off else runtime.mode
        _deliver(sink, ticket, Started(len(prompt_ids), cached, mode))
        finish = "served"
        try:
            for event in itertools.chain([first], events):
                if isinstance(event, RoundEvent):
                    ticket._count_round()
                elif isinstance(event, FinishEvent):
                    if event.result.finish_reason == "cancelled":
                        finish = "cancelled"
                    # Done before the receiver hears of it, so a late cancel() is a no-op.
                    ticket._finish()
                _deliver(sink, ticket, event)
        except Exception:
            log.exception("request %d failed while generating", ticket.job_id)
            _deliver(sink, ticket, Failed("the engine failed; see the server log", "internal"))
            return "failed"
        return finish

    def _record(self, outcome: str, ticket: Ticket) -> None:
        with self._lock:
            if outcome == "served":
                self._stats.served += 1
            elif outcome == "failed":
                self._stats.failed += 1
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


class RuntimeOwner:
    """Owns a loaded Runtime from construction on; call close() to stop it and free the models."""

    def __init__(self, runtime: EngineSession, *, max_queue: int = DEFAULT_QUEUE_SIZE) -> None:
        if max_queue < 1:
            raise ValueError("the queue must hold at least one request")
        self._runtime = runtime
        self._runner = JobRunner(runtime)
        self._queue: queue.Queue[tuple[Job, Sink, Ticket] | None] = queue.Queue(max_queue)
        self._lock = threading.Lock()
        self._next_id = 0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="engine-owner", daemon=True)
        self._thread.start()

    # -- the caller's side (any thread) ---------------------------------------------------------

    def submit(self, job: Job, sink: Sink) -> Ticket:
        with self._lock:
            if self._closed:
                raise QueueFullError("the server is shutting down")
            self._next_id += 1
            ticket = Ticket(self._next_id)
            try:
                self._queue.put_nowait((job, sink, ticket))
            except queue.Full:
                self._runner.reject()
                raise QueueFullError(
                    f"{self._queue.maxsize} requests are already waiting; retry later"
                ) from None
        return ticket

    def health(self) -> dict[str, Any]:
        return {
            **self._runner.health(),
            "queued": self._queue.qsize(),
            "queue_size": self._queue.maxsize,
        }

    def close(self) -> None:
        """Cancel the running and queued jobs, stop the thread, free the models."""
        self.stop_accepting()
        self._queue.put(None)
        self._thread.join()
        self._runtime.close()

    def stop_accepting(self) -> None:
        """Refuse new jobs and cancel the running and queued ones, so their replies end now."""
        with self._lock:
            self._closed = True
        self._runner.cancel_current("server shutting down")
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                _job, sink, ticket = item
                ticket.cancel("server shutting down")
                _deliver(sink, ticket, Failed("the server is shutting down", "cancelled"))

    # -- the owner thread ---------------------------------------------------------------------

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            job, sink, ticket = item
            with self._lock:
                closed = self._closed  # dequeued just as stop_accepting() drained the queue
            self._runner.run(job, sink, ticket, closed=closed)


def job_events(
    session: EngineSession, job: Job, control: GenerationControl
) -> tuple[list[int], Iterator[Event]]:
    """The job's prompt ids and its reply's events: the one way from a job to the engine, for
    the CLI, the server and the window alike.

    The prompt is rendered now (a Stop on control ends a slow chat template); the reply starts
    when the events are first read, after the caller has looked at the prompt."""
    if job.messages is not None:
        prompt_ids = session.chat_prompt(job.messages, control, tools=job.tools)
    else:
        prompt_ids = session.text_prompt(job.prompt or "")
    return prompt_ids, session.generate(prompt_ids, job.config, control)


def _deliver(sink: Sink, ticket: Ticket, event: OwnerEvent) -> None:
    if isinstance(event, Failed):
        ticket._finish()  # a job's last event: a later cancel() must not count
    try:
        sink(event)
    except Exception:
        # A receiver that can no longer take events (its client or event loop is gone) must not
        # kill the owner thread; stop generating for it instead.
        log.debug("request %d: its receiver failed; cancelling", ticket.job_id, exc_info=True)
        ticket.cancel("receiver gone")


def _cached_prefix(runtime: EngineSession, prompt_ids: Sequence[int]) -> int:
    """Prompt tokens the target's cache already holds (the engine feeds all but the last).

    A runtime in a child process (RPC workers) does not show its cache: 0 is reported."""
    target = runtime.target if isinstance(runtime, Runtime) else None
    cached = target.tokens if target is not None else []
    limit = min(len(cached), len(prompt_ids) - 1)
    n = 0
    while n < limit and cached[n] == prompt_ids[n]:
        n += 1
    return n
