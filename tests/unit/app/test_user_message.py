"""user_message: the one sentence each SpecChatError reads as, in the CLI, server and window."""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import pytest

from app import errors
from app.cli.report import print_error
from app.engine.config import GenerationConfig
from app.engine.events import Event
from app.engine.job_driver import Failed, Job, OwnerEvent, Ticket
from app.engine.job_queue import JobRunner, QueueFullError
from app.errors import (
    NOT_GGUF,
    TERMINAL,
    WINDOW,
    Cancelled,
    ContextOverflowError,
    DownloadError,
    DraftIncompatibleError,
    InvalidSettingError,
    KvCacheFullError,
    ModelLoadError,
    RpcConnectError,
    RpcError,
    RpcUnavailableError,
    RpcWorkerLostError,
    SettingValueError,
    SpecChatError,
    SystemPromptOverflowError,
    user_message,
)
from app.llama.facts import NO_MEMORY, MemoryUsage
from app.server.errors import refused
from ui.messages import describe

# (error, what a terminal and the server say, what the window says)
CASES: list[tuple[SpecChatError, str, str]] = [
    (
        SpecChatError("something the user can fix"),
        "something the user can fix",
        "Something the user can fix.",
    ),
    (
        ModelLoadError("/m/x.gguf", NOT_GGUF),
        f"cannot load model /m/x.gguf: {NOT_GGUF}",
        f"Cannot load model /m/x.gguf: {NOT_GGUF}.",
    ),
    (
        DraftIncompatibleError("d.gguf", "t.gguf", "vocab sizes differ"),
        "draft d.gguf is not compatible with target t.gguf: vocab sizes differ",
        "Draft d.gguf is not compatible with target t.gguf: vocab sizes differ.",
    ),
    (
        ContextOverflowError(5000, 4096),
        "the prompt is 5000 tokens but the context holds 4096; shorten the prompt or raise --n-ctx",
        "The conversation is 5000 tokens but the context holds 4096; shorten your message, start "
        "a new chat or raise "
        "the context size in Settings.",
    ),
    (
        SystemPromptOverflowError(1015, 512),
        "the system prompt alone is 1015 tokens but the context holds 512; shorten it or "
        "raise --n-ctx",
        "The system prompt alone is 1015 tokens but the context holds 512; shorten it or raise "
        "the context size in Settings.",
    ),
    (
        KvCacheFullError(900, 40, 1024),
        "the model's memory for this conversation is full (1024 tokens of context); shorten "
        "the prompt or raise --n-ctx",
        "The model's memory for this conversation is full (1024 tokens of context); start a "
        "new chat or raise the context size in Settings.",
    ),
    (
        InvalidSettingError("top-p must be in [0, 1], got 1.5"),
        "top-p must be in [0, 1], got 1.5",
        "Top-p must be in [0, 1], got 1.5.",
    ),
    (
        SettingValueError("top_p", "top-p must be in [0, 1], got 1.5"),
        "top-p must be in [0, 1], got 1.5",
        "Top-p must be in [0, 1], got 1.5.",
    ),
    (
        DownloadError("network failure: cannot reach 127.0.0.1"),
        "network failure: cannot reach 127.0.0.1",
        "Network failure: cannot reach 127.0.0.1.",
    ),
    (Cancelled("model loading cancelled"), "cancelled", "Cancelled."),
    (RpcError("RPC is unavailable"), "RPC is unavailable", "RPC is unavailable."),
    (
        RpcUnavailableError("this llama-cpp-python was built without RPC"),
        "this llama-cpp-python was built without RPC",
        "This llama-cpp-python was built without RPC.",
    ),
    (
        RpcConnectError("10.0.0.2:50052", "connection refused"),
        "RPC worker 10.0.0.2:50052: connection refused",
        "RPC worker 10.0.0.2:50052: connection refused.",
    ),
    (
        RpcWorkerLostError("an RPC worker (10.0.0.2:50052) stopped answering"),
        "an RPC worker (10.0.0.2:50052) stopped answering",
        "An RPC worker (10.0.0.2:50052) stopped answering.",
    ),
    (
        QueueFullError("8 requests are already waiting; retry later"),
        "8 requests are already waiting; retry later",
        "8 requests are already waiting; retry later.",
    ),
]


@pytest.mark.parametrize(("error", "terminal", "window"), CASES, ids=lambda c: type(c).__name__)
def test_each_error_reads_as_one_sentence(error: SpecChatError, terminal: str, window: str) -> None:
    assert user_message(error) == user_message(error, TERMINAL) == terminal
    assert user_message(error, WINDOW) == describe(error) == window


def _subclasses(cls: type[SpecChatError]) -> set[type[SpecChatError]]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def test_every_error_class_has_its_sentence_checked() -> None:
    checked = {type(error) for error, _terminal, _window in CASES}
    # A private base is never raised itself; every public class is.
    defined = {
        c
        for c in _subclasses(SpecChatError)
        if c.__module__ == errors.__name__ and not c.__name__.startswith("_")
    }
    assert defined | {SpecChatError} <= checked


def test_the_cli_prints_the_sentence_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    print_error(ContextOverflowError(300, 256), " (see specchat generate --help)")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "error: the prompt is 300 tokens but the context holds 256; shorten the prompt or raise "
        "--n-ctx (see specchat generate --help)\n"
    )


def test_the_cli_escapes_control_characters_in_a_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_error(ModelLoadError("/m/\x1b[2Jx.gguf", "not a GGUF file"))
    shown = capsys.readouterr().err
    assert shown == "error: cannot load model /m/\\x1b[2Jx.gguf: not a GGUF file\n"


def test_the_server_sends_the_same_sentence() -> None:
    error = refused(InvalidSettingError("top-p must be in [0, 1], got 1.5"))
    assert (error.status, error.code) == (400, "invalid_value")
    assert error.body()["error"]["message"] == "top-p must be in [0, 1], got 1.5"
    full = refused(QueueFullError("8 requests are already waiting"), 503, code="queue_full")
    assert (full.status, full.body()["error"]["type"]) == (503, "server_error")
    assert full.message == user_message(QueueFullError("8 requests are already waiting"))


@pytest.mark.parametrize(("error", "terminal", "window"), CASES, ids=lambda c: type(c).__name__)
def test_each_error_reads_the_same_after_leaving_a_child_process(
    error: SpecChatError, terminal: str, window: str
) -> None:
    # The model process behind IsolatedRuntime sends its errors to the window by pickle.
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert (user_message(again), user_message(again, WINDOW)) == (terminal, window)


class _Refusing:
    """A session whose every reply fails with `error` before its first event."""

    mode = "plain"
    prompt_cached = 0
    target_facts = None

    def __init__(self, error: SpecChatError) -> None:
        self.error = error

    def text_prompt(self, text: str, *, parse_special: bool = False) -> list[int]:  # noqa: ARG002
        return [ord(c) for c in text]

    def generate(self, *_args: object) -> Iterator[Event]:
        raise self.error

    def memory(self) -> MemoryUsage:
        return NO_MEMORY


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (ContextOverflowError(300, 256), "context"),
        (InvalidSettingError("top-k must be > 0"), "invalid"),
    ],
)
def test_a_failed_job_carries_the_same_sentence(error: SpecChatError, kind: str) -> None:
    failures: list[OwnerEvent] = []
    JobRunner(_Refusing(error)).run(
        Job(GenerationConfig(), prompt="hi"), failures.append, Ticket(1)
    )
    assert failures == [Failed(user_message(error), kind)]
