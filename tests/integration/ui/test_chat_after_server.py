"""After a local server request, the engine reads the chat back into the models' caches while
requests pause, so the chat's next reply does not re-read the whole conversation first."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.gamma import fixed
from app.engine.job_driver import Job
from app.engine.job_queue import WaitList
from app.engine.runtime import Runtime
from app.llama.config import ModelConfig
from models.compat import check_draft_file
from ui.workers.engine import EngineWorker
from ui.workers.requests import GenerateRequest

CONFIG = GenerationConfig(max_tokens=12, gamma=fixed(3))


@pytest.fixture
def worker(demo_models: Any, qapp: Any) -> Iterator[tuple[EngineWorker, Runtime]]:
    runtime = Runtime(vet_draft=check_draft_file)
    runtime.load_target(ModelConfig(str(demo_models.f32), n_ctx=512, n_threads=1))
    runtime.load_draft(ModelConfig(str(demo_models.q4_1), n_ctx=512, n_threads=1))
    yield EngineWorker(runtime), runtime
    runtime.close()


def test_the_chat_is_read_back_into_the_caches_after_a_request(
    worker: tuple[EngineWorker, Runtime], qtbot: QtBot
) -> None:
    engine, runtime = worker
    finished: list[Any] = []
    engine.generationFinished.connect(finished.append)
    messages = ({"role": "user", "content": "Name three rivers of Europe."},)
    engine.generate(GenerateRequest(1, messages, CONFIG, GenerationControl()))
    assert runtime.target is not None and finished
    chat = list(runtime.target.tokens)

    ended: list[Any] = []
    engine.serveEnded.connect(ended.append)
    job = Job(CONFIG, prompt="A completely different text about mountains and lakes")
    waiting = WaitList(engine.models.jobs)
    waiting.submit(job, lambda _event: None)
    engine.serve(waiting)
    assert ended and ended[0] is not None
    assert runtime.target.tokens[: len(chat)] != chat  # the request took the cache

    qtbot.waitUntil(
        lambda: runtime.target is not None and runtime.target.tokens == chat, timeout=10_000
    )


def test_the_window_server_reports_the_memory_the_engine_read_once_per_request(
    worker: tuple[EngineWorker, Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, runtime = worker
    reads: list[int] = []
    read_memory = runtime.memory

    def counted() -> Any:
        reads.append(1)
        return read_memory()

    monkeypatch.setattr(runtime, "memory", counted)
    messages = ({"role": "user", "content": "Name three rivers of Europe."},)
    engine.generate(GenerateRequest(1, messages, CONFIG, GenerationControl()))
    # Before any request the server already reports what the chat's reply left in the models.
    before = engine.models.jobs.health()["memory"]
    assert before is not None and before["target_weights"] > 0

    reads.clear()
    waiting = WaitList(engine.models.jobs)
    waiting.submit(Job(CONFIG, prompt="A text about mountains and lakes"), lambda _event: None)
    engine.serve(waiting)
    assert len(reads) == 1
    assert engine.models.jobs.health()["memory"]["target_kv"] > 0
