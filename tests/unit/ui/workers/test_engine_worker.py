"""The engine worker's Qt side on a scripted runtime: a chat reply and a local server request
run through the one job driver, and only their events become signals."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest

from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.job_driver import Failed, Job, OwnerEvent, Started
from app.engine.job_queue import WaitList
from tests.unit.engine.test_owner import N_CTX, ScriptedRuntime
from ui.workers.engine import EngineWorker
from ui.workers.requests import GenerateRequest, GenerationFailure

CONFIG = GenerationConfig(max_tokens=3)


def chat_as_text(messages: Sequence[Any], *_args: object, **_kwargs: object) -> list[int]:
    """A chat rendered as its messages' text, one id per character."""
    return [ord(c) for m in messages for c in m["content"]]


@pytest.fixture
def worker(qapp: Any) -> EngineWorker:
    runtime = ScriptedRuntime()
    runtime.chat_prompt = chat_as_text  # type: ignore[method-assign,assignment]
    return EngineWorker(runtime)  # type: ignore[arg-type]


def reply(worker: EngineWorker, text: str) -> dict[str, list[Any]]:
    heard: dict[str, list[Any]] = {name: [] for name in ("tokens", "rounds", "done", "failed")}
    worker.tokenReceived.connect(heard["tokens"].append)
    worker.roundReceived.connect(heard["rounds"].append)
    worker.generationFinished.connect(heard["done"].append)
    worker.generationFailed.connect(heard["failed"].append)
    messages: tuple[ChatMessage, ...] = ({"role": "user", "content": text},)
    worker.generate(GenerateRequest(7, messages, CONFIG, GenerationControl()))
    return heard


def test_a_chat_reply_becomes_signals_in_order(worker: EngineWorker) -> None:
    heard = reply(worker, "hi")
    assert [t.text for t in heard["tokens"]] == ["A", "B", "C"]
    assert [r.index for r in heard["rounds"]] == [0, 1, 2]
    assert [r.text for r in heard["done"]] == ["ABC"]
    assert heard["failed"] == []


def test_a_refused_reply_is_worded_for_the_window(worker: EngineWorker) -> None:
    heard = reply(worker, "x" * N_CTX)
    assert heard["done"] == []
    [failure] = heard["failed"]
    assert isinstance(failure, GenerationFailure) and failure.request_id == 7
    assert "start a new chat" in failure.message  # the window's sentence, not the server's


def test_a_local_server_request_runs_when_its_signal_arrives(worker: EngineWorker) -> None:
    waiting = WaitList(worker.models.jobs)
    client: list[OwnerEvent] = []
    waiting.submit(Job(CONFIG, prompt="hi"), client.append)
    started: list[bool] = []
    ended: list[Any] = []
    worker.serveStarted.connect(lambda: started.append(True))
    worker.serveEnded.connect(ended.append)
    worker.serve(waiting)
    assert started == [True] and [r.text for r in ended] == ["ABC"]
    assert isinstance(client[0], Started) and client[0].prompt_tokens == 2
    assert waiting.health()["served"] == 1


def test_a_request_the_stopped_server_already_refused_is_not_run(worker: EngineWorker) -> None:
    waiting = WaitList(worker.models.jobs)
    client: list[OwnerEvent] = []
    waiting.submit(Job(CONFIG, prompt="hi"), client.append)
    waiting.stop_accepting()
    started: list[bool] = []
    worker.serveStarted.connect(lambda: started.append(True))
    worker.serve(waiting)
    assert started == []
    assert client == [Failed("the server is shutting down", "cancelled")]


def test_a_bug_in_a_reply_is_logged_once_and_worded_for_the_window(
    qapp: Any, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*_args: object, **_kwargs: object) -> list[int]:
        raise RuntimeError("template engine exploded")

    runtime = ScriptedRuntime()
    runtime.chat_prompt = broken  # type: ignore[method-assign]
    worker = EngineWorker(runtime)  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR):
        heard = reply(worker, "hi")

    [failure] = heard["failed"]
    assert "Something went wrong (template engine exploded)" in failure.message
    tracebacks = [r for r in caplog.records if r.exc_info is not None]
    assert len(tracebacks) == 1
