"""A server whose models an RPC worker took down says so (503, /health unavailable) and loads
them again at the next request once the worker is back, where it used to answer "no target
model is loaded" (400) to every request for the rest of its life."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from app.engine import job_queue
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.events import Event, FinishEvent, TokenEvent
from app.engine.job_driver import Failed, Job, Started
from app.engine.job_queue import RuntimeOwner
from app.errors import RpcConnectError, RpcWorkerLostError
from app.llama.facts import MemoryUsage
from app.server.app import ServerSettings, _failure_error, create_app
from app.server.schemas import Defaults
from tests.helpers.asgi import get_json
from tests.unit.engine.test_owner import CONFIG, Collector, ScriptedRuntime

LOST = "an RPC worker (127.0.0.1:50601) stopped answering"
FACTS = SimpleNamespace(n_vocab=1000, n_ctx=1000)
SETTINGS = ServerSettings(Defaults(GenerationConfig(), 4), "model", 512)


class WorkerBackedRuntime(ScriptedRuntime):
    """Loses its models (as IsolatedRuntime does with its child) when `lose_next` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.target_facts: object = FACTS
        self.lose_next = False
        self.lose_mid_reply = False

    def generate(
        self, ids: Sequence[int], config: Any, control: GenerationControl, **kw: Any
    ) -> Iterator[Event]:
        if self.lose_next:
            self.lose_next = False
            self.target_facts = None
            raise RpcWorkerLostError(LOST)
        events = super().generate(ids, config, control, **kw)
        if not self.lose_mid_reply:
            return events

        def cut() -> Iterator[Event]:
            yield next(events)  # the reply's first token reaches the client
            self.target_facts = None
            raise RpcWorkerLostError(LOST)

        self.lose_mid_reply = False
        return cut()

    def memory(self) -> MemoryUsage:
        return MemoryUsage(0, 0, 0, 0, 0, 0)


def _ask(owner: RuntimeOwner) -> Failed | FinishEvent:
    sink = Collector()
    owner.submit(Job(CONFIG, prompt="a"), sink)
    last = sink.wait()[-1]
    assert isinstance(last, Failed | FinishEvent)
    return last


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "the owner thread never got there"
        time.sleep(0.01)


def test_models_lost_with_a_worker_are_loaded_again_once_it_is_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(job_queue, "RELOAD_RETRY_S", 0.05)
    runtime = WorkerBackedRuntime()
    worker_up = [False]
    tries: list[bool] = []

    def reload() -> None:
        tries.append(worker_up[0])
        if not worker_up[0]:
            raise RpcConnectError("127.0.0.1:50601", "connection refused")
        runtime.target_facts = FACTS

    owner = RuntimeOwner(runtime, reload=reload)  # type: ignore[arg-type]
    try:
        runtime.lose_next = True
        lost = _ask(owner)
        assert isinstance(lost, Failed) and lost.kind == "unavailable"
        assert LOST in lost.message
        _until(lambda: "connection refused" in owner.health().get("unavailable", ""))

        still_down = _ask(owner)
        assert isinstance(still_down, Failed) and still_down.kind == "unavailable"
        assert still_down.message.startswith("no model can answer now: ")
        assert "connection refused" in still_down.message
        _until(lambda: len(tries) >= 5)  # tried again while nothing asked

        worker_up[0] = True  # back: health says so with no request sent
        _until(lambda: "unavailable" not in owner.health())
        served = _ask(owner)
        assert isinstance(served, FinishEvent) and served.result.text == "ABC"
        assert (owner.health()["served"], owner.health()["failed"]) == (1, 2)
    finally:
        owner.close()


def test_a_worker_lost_mid_reply_ends_it_unavailable_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(job_queue, "RELOAD_RETRY_S", 0.05)
    runtime = WorkerBackedRuntime()
    owner = RuntimeOwner(runtime, reload=lambda: None)  # type: ignore[arg-type]
    try:
        runtime.lose_mid_reply = True
        sink = Collector()
        owner.submit(Job(CONFIG, prompt="a"), sink)
        events = sink.wait()
        assert isinstance(events[0], Started) and isinstance(events[1], TokenEvent)
        last = events[-1]
        assert isinstance(last, Failed) and last.kind == "unavailable" and LOST in last.message
        assert not [r for r in caplog.records if r.exc_info]  # said in words, no traceback
    finally:
        owner.close()


def test_a_reload_that_stops_halfway_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # The target loads, the draft's worker is still down: serving on without the draft would
    # leave the server plain for good; it is tried again, whole.
    monkeypatch.setattr(job_queue, "RELOAD_RETRY_S", 0.05)
    runtime = WorkerBackedRuntime()
    draft_up = [False]

    def reload() -> None:
        runtime.target_facts = FACTS
        if not draft_up[0]:
            raise RpcConnectError("127.0.0.1:50602", "connection refused")

    owner = RuntimeOwner(runtime, reload=reload)  # type: ignore[arg-type]
    try:
        runtime.lose_next = True
        _ask(owner)
        _until(lambda: "50602" in owner.health().get("unavailable", ""))
        refused = _ask(owner)
        assert isinstance(refused, Failed) and "50602" in refused.message
        draft_up[0] = True
        _until(lambda: "unavailable" not in owner.health())
        assert isinstance(_ask(owner), FinishEvent)
    finally:
        owner.close()


def test_a_reload_that_fails_in_an_unforeseen_way_leaves_the_owner_serving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(job_queue, "RELOAD_RETRY_S", 0.05)
    runtime = WorkerBackedRuntime()

    def reload() -> None:
        raise OSError(24, "Too many open files")

    owner = RuntimeOwner(runtime, reload=reload)  # type: ignore[arg-type]
    try:
        runtime.lose_next = True
        _ask(owner)
        refused = _ask(owner)  # answered, not left waiting on a dead thread
        assert isinstance(refused, Failed) and "Too many open files" in refused.message
    finally:
        owner.close()


def test_a_local_runtime_is_never_reloaded() -> None:
    runtime = WorkerBackedRuntime()
    owner = RuntimeOwner(runtime)  # type: ignore[arg-type]
    try:
        served = _ask(owner)
        assert isinstance(served, FinishEvent)
        assert "unavailable" not in owner.health()
    finally:
        owner.close()


class _Owner:
    def __init__(self, health: dict[str, Any]) -> None:
        self._health = health

    def health(self) -> dict[str, Any]:
        return dict(self._health)


def _health(owner_health: dict[str, Any]) -> tuple[int, Any]:
    app = create_app(_Owner(owner_health), SETTINGS)  # type: ignore[arg-type]
    return get_json(app, "/health")


def test_health_says_unavailable_with_503_while_no_model_can_answer() -> None:
    status, body = _health({"served": 1, "unavailable": "the models were lost"})
    assert status == 503
    assert (body["status"], body["reason"]) == ("unavailable", "the models were lost")
    assert "unavailable" not in body["requests"]
    status, body = _health({"served": 1})
    assert (status, body["status"]) == (200, "ok") and "reason" not in body


def test_a_request_the_models_cannot_answer_now_is_a_503() -> None:
    error = _failure_error(Failed(LOST, "unavailable"), chat=True)
    assert (error.status, error.code) == (503, "unavailable")
    assert error.body()["error"]["type"] == "server_error"
