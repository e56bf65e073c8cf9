"""The one owner of the models: a thread that runs queued requests in order on one Runtime.

The seam. The HTTP layer talks to an `EngineOwner` only: `submit(job, sink)` queues a job and
returns a `Ticket`; the owner later calls `sink` from its own thread with `Started` (or
`Failed`), then the engine's events (TokenEvent, RoundEvent, NoticeEvent) and a FinishEvent;
`Ticket.cancel()` stops the job between engine rounds, or before it starts if still queued.
`drive` is the one way a job runs, whoever asked for it; `WaitList` is the one bounded queue.
`RuntimeOwner` is the headless owner used by `specchat serve`; a window that serves its own
loaded models takes the same WaitList's jobs on its engine worker thread, so one process
never holds two copies of a model: one owner per model.

Each job carries its whole history; the target's cache keeps the longest common prefix with the
previous job (LlamaModel.feed), so a conversation that continues pays only for its new tokens.
A full queue refuses new jobs (QueueFullError) instead of growing without bound.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.events import Event, FinishEvent, RoundEvent
from app.engine.runtime import Runtime
from app.engine.session import EngineSession
from app.engine.tool_calls import ToolOffer
from app.errors import ContextOverflowError, SpecChatError, user_message
from app.llama.facts import MemoryUsage
from app.llama.handle import common_prefix
from app.metrics.rounds import DraftMode

log = logging.getLogger(__name__)

DEFAULT_QUEUE_SIZE = 8
_INTERNAL = "the engine failed; see the server log"


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

    prompt_ids: tuple[int, ...]
    cached_tokens: int
    mode: DraftMode

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt_ids)


FailureKind = Literal["invalid", "context", "cancelled", "internal"]


@dataclass(frozen=True, slots=True)
class Failed:
    """The job ended without a reply; `message` is one readable line. `error` is what the engine
    raised, if anything, for a front end that words its own sentence (the window)."""

    message: str
    kind: FailureKind
    error: Exception | None = field(default=None, compare=False, repr=False)


OwnerEvent = Started | Failed | Event
Sink = Callable[[OwnerEvent], None]


class QueueFullError(SpecChatError):
    """Too many requests are waiting; the client should retry later."""


class Ticket:
    """A submitted job's handle: cancel it, and see how promptly the cancel took effect."""

    def __init__(self, job_id: int, control: GenerationControl | None = None) -> None:
        self.job_id = job_id
        # The window's replies bring their own, which its Stop button and speculation toggle set.
        self.control = control or GenerationControl()
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
            self.cancelled_at = time.perf_counter()
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
    """What GET /health reports of the jobs, in its order."""

    running: bool = False
    served: int = 0
    cancelled: int = 0
    failed: int = 0
    rejected: int = 0
    last_cancel: CancelRecord | None = None
    # What the models hold, read after each job on the thread that runs them (the saved
    # conversations grow with every reply); None until read, or when the models cannot answer.
    memory: MemoryUsage | None = None


Outcome = Literal["served", "cancelled", "failed"]


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
        """Serve one job to the end and count how it ended."""
        with self._lock:
            self._stats.running = True
        try:
            outcome = drive(self._runtime, job, sink, ticket)
        finally:
            ticket._finish()
            with self._lock:
                self._stats.running = False
        self._record(outcome, ticket)
        self.read_memory()

    def read_memory(self) -> None:
        """Note what the models hold now; on the thread that runs the jobs."""
        try:
            memory: MemoryUsage | None = self._runtime.memory()
        except SpecChatError:  # the child died: the next request says so
            memory = None
        with self._lock:
            self._stats.memory = memory

    def reject(self) -> None:
        with self._lock:
            self._stats.rejected += 1

    def health(self) -> dict[str, Any]:
        with self._lock:
            return asdict(self._stats)

    def _record(self, outcome: Outcome, ticket: Ticket) -> None:
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
            ticket = Ticket(self._next_id)
            self._waiting.append((job, sink, ticket))
            self._ready.notify()
        return ticket

    def health(self) -> dict[str, Any]:
        with self._ready:
            queued = len(self._waiting)
        return {**self._runner.health(), "queued": queued, "queue_size": self._max_queue}

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
            _deliver(sink, ticket, Failed("the server is shutting down", "cancelled"))

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
    """Owns a loaded Runtime from construction on; call close() to stop it and free the models."""

    def __init__(self, runtime: EngineSession, *, max_queue: int = DEFAULT_QUEUE_SIZE) -> None:
        self._runtime = runtime
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
        while (item := self.take(wait=True)) is not None:
            self._runner.run(*item)


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


def drive(session: EngineSession, job: Job, sink: Sink, ticket: Ticket) -> Outcome:
    """Run one job to its end and tell `sink` on the way: Started (or Failed), the engine's
    events, a FinishEvent. The one job driver, for the server's requests and the window's
    replies alike; it counts nothing (JobRunner does, for the server)."""
    if ticket.cancelled:
        _deliver(sink, ticket, Failed("cancelled before it started", "cancelled"))
        return "cancelled"
    try:
        prompt_ids, events = job_events(session, job, ticket.control)
        cached = _cached_prefix(session, prompt_ids)
        # The engine checks the prompt against the context before its first event, so a
        # refusal arrives here, before the client is told the job started.
        first = next(events)
    except SpecChatError as exc:
        kind: FailureKind = "context" if isinstance(exc, ContextOverflowError) else "invalid"
        _deliver(sink, ticket, Failed(user_message(exc), kind, exc))
        return "failed"
    except Exception as exc:
        log.exception("request %d failed", ticket.job_id)
        _deliver(sink, ticket, Failed(_INTERNAL, "internal", exc))
        return "failed"
    mode: DraftMode = "plain" if job.config.gamma.is_off else session.mode
    _deliver(sink, ticket, Started(tuple(prompt_ids), cached, mode))
    finish: Outcome = "served"
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
    except Exception as exc:
        log.exception("request %d failed while generating", ticket.job_id)
        _deliver(sink, ticket, Failed(_INTERNAL, "internal", exc))
        return "failed"
    return finish


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
    return common_prefix(cached, prompt_ids[:-1])
