"""RuntimeOwner's queue on a scripted runtime: order, refusals, cancels, a failing receiver.

The real engine runs in the server tests; here a scripted runtime makes each case certain.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.events import Event, FinishEvent, RoundEvent, TokenEvent
from app.engine.job_driver import Failed, Job, OwnerEvent, Started
from app.engine.job_queue import QueueFullError, RuntimeOwner
from app.engine.result import GenerationResult
from app.errors import ContextOverflowError, InvalidSettingError, SpecChatError
from app.llama.facts import MemoryUsage
from app.metrics.rounds import RoundRecord
from app.metrics.summary import summarize

CONFIG = GenerationConfig(max_tokens=3)
N_CTX = 50


class ScriptedRuntime:
    """Emits one token per round; each round waits for `gate` so tests control the pace."""

    mode = "plain"
    prompt_cached = 0
    target_facts = None  # as the protocol has it; the window's host reads memory only with one

    def __init__(self) -> None:
        self.target = SimpleNamespace(tokens=[])
        self.gate = threading.Event()
        self.gate.set()
        self.started: list[str] = []
        self.closed = False
        # Bytes of saved conversations: each reply saves 100 more, as a prompt cache would.
        self.saved = 0
        self.memory_fails = False

    def text_prompt(self, text: str, *, parse_special: bool = False) -> list[int]:  # noqa: ARG002
        return [ord(c) for c in text]

    def chat_prompt(
        self,
        _messages: Sequence[Any],
        _control: object = None,
        tools: object = None,  # noqa: ARG002 - the protocol names it
    ) -> list[int]:
        raise InvalidSettingError("the model's chat template failed: no")

    def generate(
        self, ids: Sequence[int], config: GenerationConfig, control: GenerationControl, **_: Any
    ) -> Iterator[Event]:
        def events() -> Iterator[Event]:
            if len(ids) >= N_CTX:
                raise ContextOverflowError(len(ids), N_CTX)
            self.started.append("".join(map(chr, ids)))
            rounds = []
            for i in range(config.max_tokens):
                if control.stop_requested:
                    break
                assert self.gate.wait(10)
                yield TokenEvent(65 + i, chr(65 + i), False, i)
                rounds.append(RoundRecord(i, "plain", 0, 0, 0, 1, 0.0, 0.01, 0))
                yield RoundEvent(rounds[-1])
            reason = "cancelled" if control.stop_requested else "length"
            stats = summarize(
                rounds, prompt_tokens=len(ids), generated_tokens=len(rounds),
                prompt_s=0.0, generation_s=0.01, ttft_s=None, plain_step_s=None,
            )  # fmt: skip
            text = "".join(chr(65 + r.index) for r in rounds)
            ids_out = [65 + r.index for r in rounds]
            self.saved += 100
            yield FinishEvent(GenerationResult(text, ids_out, reason, "plain", stats, (), ()))

        return events()

    def memory(self) -> MemoryUsage:
        if self.memory_fails:
            raise SpecChatError("the engine process ended")
        return MemoryUsage(1000, 10, 0, 0, 0, 0, target_saved=self.saved)

    def close(self) -> None:
        self.closed = True


class Collector:
    def __init__(self) -> None:
        self.events: list[OwnerEvent] = []
        self.done = threading.Event()

    def __call__(self, event: OwnerEvent) -> None:
        self.events.append(event)
        if isinstance(event, FinishEvent | Failed):
            self.done.set()

    def wait(self) -> list[OwnerEvent]:
        assert self.done.wait(10)
        return self.events


@pytest.fixture
def runtime() -> ScriptedRuntime:
    return ScriptedRuntime()


def make_owner(runtime: ScriptedRuntime, max_queue: int = 4) -> RuntimeOwner:
    return RuntimeOwner(runtime, max_queue=max_queue)  # type: ignore[arg-type]


def text_job(prompt: str) -> Job:
    return Job(CONFIG, prompt=prompt)


def test_jobs_run_in_order_each_with_its_own_reply(runtime: ScriptedRuntime) -> None:
    owner = make_owner(runtime)
    runtime.gate.clear()
    sinks = [Collector() for _ in range(3)]
    for name, sink in zip("abc", sinks, strict=True):
        owner.submit(text_job(name), sink)
    runtime.gate.set()
    results = [sink.wait() for sink in sinks]
    owner.close()
    assert runtime.started == ["a", "b", "c"]
    for events in results:
        assert isinstance(events[0], Started)
        assert isinstance(events[-1], FinishEvent)
        assert events[-1].result.text == "ABC"
    assert owner.health()["served"] == 3
    assert runtime.closed


def test_a_full_queue_refuses_instead_of_growing(runtime: ScriptedRuntime) -> None:
    owner = make_owner(runtime, max_queue=1)
    runtime.gate.clear()
    running, waiting = Collector(), Collector()
    owner.submit(text_job("a"), running)
    while not runtime.started:  # "a" has left the queue
        threading.Event().wait(0.01)
    owner.submit(text_job("b"), waiting)
    with pytest.raises(QueueFullError):
        owner.submit(text_job("c"), Collector())
    assert owner.health()["rejected"] == 1
    runtime.gate.set()
    running.wait()
    waiting.wait()
    owner.close()


def test_cancel_before_start_skips_the_job(runtime: ScriptedRuntime) -> None:
    owner = make_owner(runtime)
    runtime.gate.clear()
    first, second = Collector(), Collector()
    owner.submit(text_job("a"), first)
    ticket = owner.submit(text_job("b"), second)
    ticket.cancel("client disconnected")
    runtime.gate.set()
    events = second.wait()
    first.wait()
    owner.close()
    assert runtime.started == ["a"]
    assert isinstance(events[-1], Failed) and events[-1].kind == "cancelled"


def test_a_cancelled_waiting_job_leaves_the_queue_at_once(runtime: ScriptedRuntime) -> None:
    owner = make_owner(runtime, max_queue=1)
    runtime.gate.clear()
    running, gone, later = Collector(), Collector(), Collector()
    owner.submit(text_job("a"), running)
    while not runtime.started:  # "a" has left the queue
        threading.Event().wait(0.01)
    ticket = owner.submit(text_job("b"), gone)
    ticket.cancel("client disconnected")
    # While "a" still runs: its receiver is told, its place is free, and it counts as cancelled.
    assert gone.wait() == [Failed("cancelled before it started", "cancelled")]
    health = owner.health()
    assert (health["queued"], health["cancelled"], health["running"]) == (0, 1, True)
    assert health["last_cancel"]["reason"] == "client disconnected"
    owner.submit(text_job("c"), later)  # not refused as a full queue
    runtime.gate.set()
    running.wait()
    later.wait()
    owner.close()
    assert runtime.started == ["a", "c"]
    assert (owner.health()["served"], owner.health()["cancelled"]) == (2, 1)


def test_cancel_while_running_stops_within_one_round(runtime: ScriptedRuntime) -> None:
    owner = make_owner(runtime)
    runtime.gate.clear()
    sink = Collector()
    ticket = owner.submit(Job(GenerationConfig(max_tokens=50), prompt="a"), sink)
    while not runtime.started:
        threading.Event().wait(0.01)
    ticket.cancel("client disconnected")
    runtime.gate.set()
    events = sink.wait()
    owner.close()
    finish = events[-1]
    assert isinstance(finish, FinishEvent) and finish.result.finish_reason == "cancelled"
    last = owner.health()["last_cancel"]
    assert last["reason"] == "client disconnected"
    assert last["rounds_after_cancel"] <= 1
    assert owner.health()["cancelled"] == 1


def test_refusals_arrive_as_failures_and_the_owner_keeps_serving(
    runtime: ScriptedRuntime,
) -> None:
    owner = make_owner(runtime)
    too_long, bad_template, fine = Collector(), Collector(), Collector()
    owner.submit(text_job("x" * N_CTX), too_long)
    owner.submit(Job(CONFIG, messages=({"role": "user", "content": "hi"},)), bad_template)
    owner.submit(text_job("ok"), fine)
    context_failure = too_long.wait()[-1]
    template_failure = bad_template.wait()[-1]
    fine_events = fine.wait()
    owner.close()
    assert isinstance(context_failure, Failed) and context_failure.kind == "context"
    assert isinstance(template_failure, Failed) and template_failure.kind == "invalid"
    assert isinstance(fine_events[-1], FinishEvent)


def test_a_receiver_that_fails_cancels_its_job_only(runtime: ScriptedRuntime) -> None:
    owner = make_owner(runtime)

    def broken(event: OwnerEvent) -> None:
        raise RuntimeError("event loop closed")

    ticket = owner.submit(Job(GenerationConfig(max_tokens=50), prompt="a"), broken)
    after = Collector()
    owner.submit(text_job("b"), after)
    events = after.wait()
    owner.close()
    assert ticket.cancelled
    assert isinstance(events[-1], FinishEvent) and events[-1].result.text == "ABC"


def test_stop_accepting_ends_the_running_job_and_tells_the_waiting_ones(
    runtime: ScriptedRuntime,
) -> None:
    owner = make_owner(runtime)
    runtime.gate.clear()
    running, waiting = Collector(), Collector()
    owner.submit(Job(GenerationConfig(max_tokens=50), prompt="a"), running)
    while not runtime.started:
        threading.Event().wait(0.01)
    owner.submit(text_job("b"), waiting)
    assert owner.health()["queued"] == 1
    owner.stop_accepting()
    assert waiting.wait() == [Failed("the server is shutting down", "cancelled")]
    with pytest.raises(QueueFullError, match="shutting down"):
        owner.submit(text_job("c"), Collector())
    runtime.gate.set()
    finish = running.wait()[-1]
    owner.close()
    assert isinstance(finish, FinishEvent) and finish.result.finish_reason == "cancelled"
    assert runtime.started == ["a"]
    assert owner.health()["queued"] == 0


def test_waiting_jobs_the_shutdown_cancels_count_as_cancelled(runtime: ScriptedRuntime) -> None:
    owner = make_owner(runtime)
    runtime.gate.clear()
    running = Collector()
    owner.submit(Job(GenerationConfig(max_tokens=50), prompt="a"), running)
    while not runtime.started:
        threading.Event().wait(0.01)
    waiting = [Collector(), Collector()]
    for name, sink in zip("bc", waiting, strict=True):
        owner.submit(text_job(name), sink)
    owner.stop_accepting()
    for sink in waiting:
        sink.wait()
    # Counted before their receivers heard of it, as a client's own withdrawal is.
    assert owner.health()["cancelled"] == 2
    runtime.gate.set()
    running.wait()
    owner.close()
    assert (owner.health()["cancelled"], owner.health()["served"]) == (3, 0)
    assert owner.health()["last_cancel"]["reason"] == "server shutting down"


def test_health_counts_a_job_before_its_receiver_hears_the_end(runtime: ScriptedRuntime) -> None:
    owner = make_owner(runtime)
    seen: list[dict[str, Any]] = []

    class Reading(Collector):
        """Reads /health as it hears the end, as a client does once it has its reply."""

        def __call__(self, event: OwnerEvent) -> None:
            if isinstance(event, FinishEvent | Failed):
                seen.append(owner.health())
            super().__call__(event)

    # Served, then refused for a prompt past the context: the client's to fix, not a failure.
    for job in (text_job("a"), text_job("x" * N_CTX)):
        sink = Reading()
        owner.submit(job, sink)
        sink.wait()
    owner.close()
    assert [(h["served"], h["invalid"], h["failed"], h["running"]) for h in seen] == [
        (1, 0, 0, False),
        (1, 1, 0, False),
    ]
    assert owner.health()["served"] == 1  # counted once


def test_health_reports_what_the_models_hold_as_of_the_last_job(runtime: ScriptedRuntime) -> None:
    owner = make_owner(runtime)
    for name in "ab":
        sink = Collector()
        owner.submit(text_job(name), sink)
        sink.wait()
    owner.close()  # the memory is read after each job, on the owner's thread

    memory = owner.health()["memory"]
    assert memory["target_weights"] == 1000
    assert memory["target_saved"] == 200


def test_models_that_cannot_report_their_memory_leave_it_unknown_and_keep_serving(
    runtime: ScriptedRuntime,
) -> None:
    runtime.memory_fails = True
    owner = make_owner(runtime)
    sink = Collector()
    owner.submit(text_job("a"), sink)
    events = sink.wait()
    owner.close()

    assert isinstance(events[-1], FinishEvent)
    assert owner.health()["memory"] is None
    assert owner.health()["served"] == 1
