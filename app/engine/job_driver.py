"""One job from start to end: what it asks, what its receiver hears, and `drive`, the one way
it runs, whoever asked for it (a server request, a window reply, `specchat generate`).

A receiver (`Sink`) hears `Started` (or `Failed`), then the engine's events (TokenEvent,
RoundEvent, NoticeEvent) and a FinishEvent; the job's `Ticket` stops it between engine rounds,
or before it starts. A receiver that has all of the reply it wants (a stop string matched)
raises `ReplyComplete`: the engine ends the reply at the end of its round, and the job counts as
served. Queues and owners of the models are app/engine/job_queue.py's.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.events import Event, FinishEvent, RoundEvent
from app.engine.session import EngineSession
from app.engine.tool_calls import ToolOffer
from app.errors import (
    Cancelled,
    ContextOverflowError,
    RpcError,
    SpecChatError,
    SystemPromptOverflowError,
    user_message,
)
from app.metrics.rounds import DraftMode

log = logging.getLogger(__name__)

_INTERNAL = "the engine failed; see the server log"


@dataclass(frozen=True, slots=True)
class Job:
    """One reply to generate: a chat (messages) or a raw text prompt, with its settings."""

    config: GenerationConfig
    messages: tuple[ChatMessage, ...] | None = None
    prompt: str | None = None
    tools: ToolOffer | None = None  # functions a chat reply may call
    # Whether special-token text in a raw prompt ("<|im_start|>") reads as those tokens, as
    # llama-server reads completion prompts: a raw prompt has no roles to forge. Off for the
    # CLI's --raw, which completes the text as written; chat messages never parse it.
    prompt_specials: bool = False


@dataclass(frozen=True, slots=True)
class Started:
    """The job left the queue and its prompt fits; cached_tokens were not read again: the
    target's cache held them, live or restored from its prompt cache."""

    prompt_ids: tuple[int, ...]
    cached_tokens: int
    mode: DraftMode

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt_ids)


FailureKind = Literal["invalid", "context", "cancelled", "internal", "unavailable"]
"""unavailable: the models cannot answer now (an RPC worker stopped answering), nothing the
request did: a server says so with 503, and may answer the same request later."""


@dataclass(frozen=True, slots=True)
class Failed:
    """The job ended without a reply; `message` is one readable line. `error` is what the engine
    raised, if anything, for a front end that words its own sentence (the window)."""

    message: str
    kind: FailureKind
    error: Exception | None = field(default=None, compare=False, repr=False)


OwnerEvent = Started | Failed | Event
Sink = Callable[[OwnerEvent], None]


class ReplyComplete(Exception):  # noqa: N818 - a signal, like StopIteration, not an error
    """Raised by a Sink that took an event and needs no more of the reply (a stop string
    matched): generation stops at the end of the engine's round, promptly because the sink runs
    on the engine's own thread, and the job counts as served, not cancelled.

    kept_tokens: the reply's tokens the receiver keeps, when it drops those after them."""

    def __init__(self, kept_tokens: int | None = None) -> None:
        super().__init__()
        self.kept_tokens = kept_tokens


class Ticket:
    """A submitted job's handle: cancel it, and see how promptly the cancel took effect."""

    def __init__(
        self,
        job_id: int,
        control: GenerationControl | None = None,
        *,
        on_cancel: Callable[[Ticket], None] | None = None,
    ) -> None:
        self.job_id = job_id
        # Told after a cancel took: the queue holding a job that has not started drops it then,
        # so a client that gave up stops holding a place in it.
        self._on_cancel = on_cancel
        # The window's replies bring their own, which its Stop button and speculation toggle set.
        self.control = control or GenerationControl()
        self._lock = threading.Lock()
        self._done = False
        self.rounds = 0
        # Engine rounds completed when cancel() came, and when the job finally stopped.
        self.rounds_at_cancel: int | None = None
        self.cancelled_at: float | None = None
        self.cancel_reason = ""
        # The receiver had the whole reply before the engine ended it (ReplyComplete).
        self.completed = False

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop the job between rounds; a no-op once it has finished or is complete.

        reason says why in the server's log and /health, e.g. "client disconnected"."""
        with self._lock:
            if self._done or self.completed or self.rounds_at_cancel is not None:
                return
            self.rounds_at_cancel = self.rounds
            self.cancelled_at = time.perf_counter()
            self.cancel_reason = reason
        self.control.stop()
        if self._on_cancel is not None:
            self._on_cancel(self)

    def complete(self, kept_tokens: int | None = None) -> None:
        """The receiver has the whole reply: stop between rounds, and count the job served.
        kept_tokens: how much of the reply it keeps, when it drops the rest."""
        with self._lock:
            if self._done or self.rounds_at_cancel is not None:
                return
            self.completed = True
        self.control.kept_tokens = kept_tokens
        self.control.stop()

    @property
    def cancelled(self) -> bool:
        return self.rounds_at_cancel is not None

    def _count_round(self) -> None:
        with self._lock:
            self.rounds += 1

    def finish(self) -> None:
        """The job has ended: a later cancel() is a no-op and counts nothing."""
        with self._lock:
            self._done = True


Outcome = Literal["served", "cancelled", "invalid", "failed"]
"""invalid: refused for what the request asked (a prompt past the context, a grammar llama.cpp
cannot parse), which is no fault of the server's; failed: the engine or an RPC worker failed."""


def job_events(
    session: EngineSession, job: Job, control: GenerationControl
) -> tuple[list[int], Iterator[Event]]:
    """The job's prompt ids and its reply's events: the one way from a job to the engine, for
    the CLI, the server and the window alike.

    The prompt is rendered now (a Stop on control ends a slow chat template); the reply starts
    when the events are first read, after the caller has looked at the prompt."""
    facts = session.target_facts
    if facts is not None:
        job.config.sampling.check_vocabulary(facts.n_vocab)
    if job.messages is not None:
        prompt_ids = session.chat_prompt(job.messages, control, tools=job.tools)
        if facts is not None and len(prompt_ids) >= facts.n_ctx:
            _refuse_oversized_system(session, job.messages, facts.n_ctx, control)
    else:
        prompt_ids = session.text_prompt(job.prompt or "", parse_special=job.prompt_specials)
    return prompt_ids, session.generate(prompt_ids, job.config, control)


def _refuse_oversized_system(
    session: EngineSession,
    messages: Sequence[ChatMessage],
    n_ctx: int,
    control: GenerationControl,
) -> None:
    """Raise SystemPromptOverflowError when the system message would not fit even in a new
    chat, whose remedy differs from a long conversation's. Rendered with an empty user turn
    (templates that refuse a system message on its own accept that), and only for a prompt
    that overflows already, so a reply that fits never pays for it."""
    if not messages or messages[0]["role"] != "system":
        return
    if control.stop_requested:  # a session in a child process cannot stop a render midway
        raise Cancelled("stopped while the chat template was rendering")
    try:
        alone = session.chat_prompt([messages[0], {"role": "user", "content": ""}], control)
    except Cancelled:
        raise
    except SpecChatError:
        return  # a template that refuses this shape: the whole prompt's overflow says enough
    if len(alone) >= n_ctx:
        raise SystemPromptOverflowError(len(alone), n_ctx)


def drive(session: EngineSession, job: Job, sink: Sink, ticket: Ticket) -> Outcome:
    """Run one job to its end and tell `sink` on the way: Started (or Failed), the engine's
    events, a FinishEvent. The one job driver, for the server's requests and the window's
    replies alike; it counts nothing (JobRunner does, for the server)."""
    if ticket.cancelled:
        deliver(sink, ticket, Failed("cancelled before it started", "cancelled"))
        return "cancelled"
    try:
        prompt_ids, events = job_events(session, job, ticket.control)
        # The engine checks the prompt against the context before its first event, so a
        # refusal arrives here, before the client is told the job started.
        first = next(events)
        # Read after the prompt's pass: it may have restored a saved conversation, or emptied
        # the cache (exact mode's first reply), so what the cache held before says neither.
        cached = _cached_prefix(session, prompt_ids)
    except Cancelled as exc:  # stopped while the prompt was being made (the chat template)
        deliver(sink, ticket, Failed(user_message(exc), "cancelled", exc))
        return "cancelled"
    except SpecChatError as exc:
        failed = Failed(user_message(exc), _failure_kind(exc), exc)
        deliver(sink, ticket, failed)
        return outcome_of(failed, ticket)
    except Exception as exc:
        log.exception("request %d failed", ticket.job_id)
        deliver(sink, ticket, Failed(_INTERNAL, "internal", exc))
        return "failed"
    mode: DraftMode = "plain" if job.config.gamma.is_off else session.mode
    deliver(sink, ticket, Started(tuple(prompt_ids), cached, mode))
    finish: Outcome = "served"
    try:
        for event in itertools.chain([first], events):
            if isinstance(event, RoundEvent):
                ticket._count_round()
            elif isinstance(event, FinishEvent):
                finish = outcome_of(event, ticket)
                # Done before the receiver hears of it, so a late cancel() is a no-op.
                ticket.finish()
            deliver(sink, ticket, event)
    except RpcError as exc:  # a worker lost mid-reply: said in words, no traceback
        log.warning("request %d failed while generating: %s", ticket.job_id, user_message(exc))
        deliver(sink, ticket, Failed(user_message(exc), "unavailable", exc))
        return "failed"
    except Exception as exc:
        log.exception("request %d failed while generating", ticket.job_id)
        deliver(sink, ticket, Failed(_INTERNAL, "internal", exc))
        return "failed"
    return finish


def _failure_kind(exc: SpecChatError) -> FailureKind:
    if isinstance(exc, ContextOverflowError):
        return "context"
    return "unavailable" if isinstance(exc, RpcError) else "invalid"


def outcome_of(event: FinishEvent | Failed, ticket: Ticket) -> Outcome:
    """How a job ended, from its last event: what drive returns, known as the event is sent."""
    if isinstance(event, Failed):
        if event.kind in ("invalid", "context"):
            return "invalid"
        return "cancelled" if event.kind == "cancelled" else "failed"
    stopped = event.result.finish_reason == "cancelled" and not ticket.completed
    return "cancelled" if stopped else "served"


def deliver(sink: Sink, ticket: Ticket, event: OwnerEvent) -> None:
    """Hand `event` to the job's receiver; one that fails cancels the job, not the owner."""
    if isinstance(event, Failed):
        ticket.finish()  # a job's last event: a later cancel() must not count
    try:
        sink(event)
    except ReplyComplete as complete:
        ticket.complete(complete.kept_tokens)
    except Exception:
        # A receiver that can no longer take events (its client or event loop is gone) must not
        # kill the owner thread; stop generating for it instead.
        log.debug("request %d: its receiver failed; cancelling", ticket.job_id, exc_info=True)
        ticket.cancel("receiver gone")


def _cached_prefix(session: EngineSession, prompt_ids: Sequence[int]) -> int:
    """Prompt tokens the target's cache held when the prompt's pass began, live or restored,
    all but the last: the engine always feeds that one afresh."""
    return min(session.prompt_cached, len(prompt_ids) - 1)
