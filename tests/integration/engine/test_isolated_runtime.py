"""IsolatedRuntime behaves as Runtime does for its callers: progress, stop, early exit, errors,
and what the prompt's pass found in the cache."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

import pytest

from app.engine import isolated_child as child
from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.events import FinishEvent, TokenEvent
from app.engine.gamma import OFF
from app.engine.isolated import IsolatedRuntime
from app.engine.job_driver import Job, Started, Ticket, drive
from app.engine.prompt_pass import MIN_PART, part_size
from app.errors import (
    Cancelled,
    ContextOverflowError,
    DraftIncompatibleError,
    InvalidSettingError,
    ModelLoadError,
    RpcConnectError,
    RpcWorkerLostError,
    SpecChatError,
)
from app.llama.config import ModelConfig

pytestmark = pytest.mark.model
PROMPT = "Once upon a time"


@pytest.fixture(scope="module")
def target(demo_models: Any) -> ModelConfig:
    return ModelConfig(str(demo_models.f32), n_ctx=256, n_threads=1)


@pytest.fixture
def runtime() -> Iterator[IsolatedRuntime]:
    rt = IsolatedRuntime()
    yield rt
    rt.close()


def test_load_progress_reaches_the_caller_and_can_cancel(
    runtime: IsolatedRuntime, target: ModelConfig
) -> None:
    seen: list[float] = []
    runtime.load_target(target, lambda f: seen.append(f) or True)
    assert seen and seen[-1] == pytest.approx(1.0)
    with pytest.raises(Cancelled):
        runtime.load_target(target, lambda _fraction: False)
    assert runtime.target is None


def test_stop_reaches_the_child_between_rounds(
    runtime: IsolatedRuntime, target: ModelConfig
) -> None:
    runtime.load_target(target)
    control = GenerationControl()
    tokens = 0
    result = None
    for event in runtime.generate(
        runtime.text_prompt(PROMPT), GenerationConfig(max_tokens=200, gamma=OFF), control
    ):
        if isinstance(event, TokenEvent):
            tokens += 1
            if tokens == 2:
                control.stop()
        elif isinstance(event, FinishEvent):
            result = event.result
    assert result is not None
    assert result.finish_reason == "cancelled"
    assert len(result.token_ids) < 200


def test_a_stop_reaches_the_child_while_it_reads_the_prompt(
    runtime: IsolatedRuntime, demo_models: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long prompt is read in parts there too, and a Stop ends the pass, inside the part under
    way: no token is drawn, and the child's cache keeps only whole parts read before the Stop
    (none, when it comes with the prompt)."""
    runtime.load_target(
        ModelConfig(str(demo_models.f32), n_ctx=1024, n_batch=MIN_PART, n_threads=1)
    )
    prompt = [1, *range(2000, 2700)]  # eleven parts
    control = GenerationControl()
    send = runtime._send

    def send_then_stop(request: child.Request, *, connecting: str | None = None) -> Connection:
        conn = send(request, connecting=connecting)
        if isinstance(request, child.Generate):
            control.stop()  # the user's Stop, pressed as the prompt goes to the child
        return conn

    monkeypatch.setattr(runtime, "_send", send_then_stop)
    events = list(runtime.generate(prompt, GenerationConfig(max_tokens=20, gamma=OFF), control))
    monkeypatch.undo()
    assert not any(isinstance(event, TokenEvent) for event in events)
    finish = events[-1]
    assert isinstance(finish, FinishEvent)
    assert finish.result.finish_reason == "cancelled"
    # The same prompt again: the cache holds what the stopped pass had read.
    list(runtime.generate(prompt, GenerationConfig(max_tokens=1, gamma=OFF)))
    assert runtime.prompt_cached <= len(prompt) - part_size(MIN_PART)
    assert runtime.prompt_cached % part_size(MIN_PART) == 0


def test_the_childs_reading_of_a_long_prompt_reaches_the_callers_control(
    runtime: IsolatedRuntime, demo_models: Any
) -> None:
    # The window showed "…" for the whole read of a model on RPC workers.
    runtime.load_target(
        ModelConfig(str(demo_models.f32), n_ctx=1024, n_batch=MIN_PART, n_threads=1)
    )
    prompt = [1, *range(2000, 2700)]
    seen: list[tuple[int, int] | None] = []
    control = GenerationControl(on_prompt_read=seen.append)
    events = list(runtime.generate(prompt, GenerationConfig(max_tokens=2, gamma=OFF), control))
    assert isinstance(events[-1], FinishEvent)
    read = [s for s in seen if s is not None]
    assert len(read) >= 5 and read == sorted(read) and all(t == len(prompt) for _, t in read)
    assert seen[-1] is None and control.prompt_read is None


# Renders for seconds before the default budget ends it (a step count or the deadline).
RUNAWAY_TEMPLATE = (
    "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
)


def test_a_stop_reaches_a_chat_template_rendering_in_the_child(
    runtime: IsolatedRuntime, demo_models: Any
) -> None:
    """A Stop ends the render as Cancelled, as in process, not as the budget's error; and the
    child answers the next call."""
    runtime.load_target(
        ModelConfig(str(demo_models.f32), n_ctx=256, n_threads=1, chat_template=RUNAWAY_TEMPLATE)
    )
    messages: list[ChatMessage] = [{"role": "user", "content": "hi"}]
    with pytest.raises(InvalidSettingError):  # left alone, the budget ends it
        runtime.chat_prompt(messages, GenerationControl())
    stopped = GenerationControl()
    stopped.stop()  # pressed as the render begins
    with pytest.raises(Cancelled):
        runtime.chat_prompt(messages, stopped)
    assert runtime.text_prompt(PROMPT)


def test_a_reply_abandoned_early_leaves_the_runtime_ready(
    runtime: IsolatedRuntime, target: ModelConfig
) -> None:
    runtime.load_target(target)
    ids = runtime.text_prompt(PROMPT)
    config = GenerationConfig(max_tokens=100, gamma=OFF)
    for event in runtime.generate(ids, config):
        if isinstance(event, TokenEvent):
            break  # the caller walks away mid-reply
    events = list(runtime.generate(ids, GenerationConfig(max_tokens=3, gamma=OFF)))
    assert isinstance(events[-1], FinishEvent)
    assert len(events[-1].result.token_ids) == 3


def test_a_prompt_the_childs_cache_holds_is_counted_as_cached(
    runtime: IsolatedRuntime, target: ModelConfig
) -> None:
    """A server on RPC workers reports `timings.cache_n` from this, as a local one does."""
    runtime.load_target(target)
    job = Job(GenerationConfig(max_tokens=3, gamma=OFF), prompt=PROMPT)
    started: list[Started] = []

    def sink(event: object) -> None:
        if isinstance(event, Started):
            started.append(event)

    for job_id in (1, 2):
        assert drive(runtime, job, sink, Ticket(job_id)) == "served"
    first, again = started
    assert first.cached_tokens == 0
    assert again.cached_tokens == again.prompt_tokens - 1


def test_errors_in_the_child_arrive_as_the_same_sentences(
    runtime: IsolatedRuntime, tmp_path: Any
) -> None:
    missing = tmp_path / "missing.gguf"
    with pytest.raises(SpecChatError) as caught:
        runtime.load_target(ModelConfig(str(missing)))
    assert isinstance(caught.value, ModelLoadError)  # the type survives the trip, too
    assert str(caught.value) == str(ModelLoadError(str(missing), "no such file"))


@pytest.mark.parametrize(
    "error",
    [
        ModelLoadError("a.gguf", "not a GGUF file"),
        DraftIncompatibleError("d.gguf", "t.gguf", "different vocabularies"),
        ContextOverflowError(5000, 4096),
        RpcConnectError("10.0.0.2:50052", "connection refused"),
        RpcWorkerLostError("an RPC worker stopped answering"),
    ],
)
def test_every_error_crosses_the_process_boundary_whole(error: SpecChatError) -> None:
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert str(again) == str(error)
    assert vars(again) == vars(error)
