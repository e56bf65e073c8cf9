"""The child side of IsolatedRuntime: a Runtime driven by typed messages over a pipe.

Runs in a process of its own because llama.cpp aborts the process when an RPC worker drops its
connection or answers garbage. Its stdout and stderr go to a log file that the parent reads to
say why the child died (app/engine/crash_log.py).

The parent sends one message at a time: a `Call` (its `run` is the Runtime method it stands
for, so mypy checks both ends), a `Generate`, or `Close`; while a generation runs, `Control`
messages pass the user's Stop and γ switches on. The child answers a call with `Progress`
messages (loads) and then `Returned` or `Raised`; a generation with its events (and
`PromptRead` while a long prompt is read), then `Done` or `Raised`.

Who holds the pipe: the child's main thread runs every request and sends every answer. It also
receives every request, except while a generation runs: then `_ControlReader`'s thread alone
receives, and sets each `Control` on the generation's GenerationControl the moment it arrives,
as the window's UI thread sets the flags of a generation in process. So a Stop reaches the
prompt's pass between two of its parts (app/engine/prompt_pass.py), not after the whole pass.
That thread has ended before the generation's `Done` or `Raised` is sent, and the parent sends
only `Control` messages until it has read one of those, so it never takes a request. A chat
prompt's render is watched the same way, so a Stop ends a slow chat template there too.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.events import Event
from app.engine.runtime import DraftVetter, Runtime
from app.engine.tool_calls import ToolDialect, ToolOffer
from app.errors import SpecChatError
from app.llama import rpc
from app.llama.backend import LLAMA_LOG_NAME, send_output_to_log
from app.llama.config import ModelConfig
from app.llama.facts import MemoryUsage, ModelFacts
from app.llama.model import LoadProgress
from app.llama.rpc_keepalive import start_keepalive_thread
from app.metrics.rounds import DraftMode

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Child:
    """What a call runs on in the child: its Runtime, the load progress back to the parent, and
    the pipe, for a call that a Stop must reach while it runs."""

    runtime: Runtime
    progress: LoadProgress
    conn: Connection


class Call(Generic[T]):
    """One request whose answer is a value of type T (or an error)."""

    def run(self, child: Child) -> T:
        raise NotImplementedError


# -- the calls: one per Runtime method the parent uses, plus the workers' own -----------------


@dataclass(frozen=True, slots=True)
class Ready(Call[list[rpc.Device]]):
    """Load llama.cpp and bind ggml, so that a handshake timed next times the worker alone."""

    def run(self, _child: Child) -> list[rpc.Device]:
        return rpc.local_devices()


@dataclass(frozen=True, slots=True)
class Connect(Call[list[rpc.Device]]):
    spec: str  # KEY@HOST:PORT: the child learns the worker's key with it, never through files

    def run(self, _child: Child) -> list[rpc.Device]:
        return rpc.add_server(self.spec)


@dataclass(frozen=True, slots=True)
class WorkerMemory(Call[list[rpc.WorkerMemory]]):
    def run(self, _child: Child) -> list[rpc.WorkerMemory]:
        return rpc.registered_memory()


@dataclass(frozen=True, slots=True)
class LoadTarget(Call[ModelFacts]):
    config: ModelConfig

    def run(self, child: Child) -> ModelFacts:
        return child.runtime.load_target(self.config, child.progress)


@dataclass(frozen=True, slots=True)
class LoadDraft(Call[ModelFacts]):
    config: ModelConfig
    vetted: bool
    joined: bool | None = None

    def run(self, child: Child) -> ModelFacts:
        return child.runtime.load_draft(
            self.config, child.progress, vetted=self.vetted, joined=self.joined
        )


@dataclass(frozen=True, slots=True)
class CheckDraft(Call[None]):
    draft: Path

    def run(self, child: Child) -> None:
        child.runtime.check_draft(self.draft)


@dataclass(frozen=True, slots=True)
class UseSuffixIndex(Call[None]):
    def run(self, child: Child) -> None:
        child.runtime.use_suffix_index()


@dataclass(frozen=True, slots=True)
class ClearDraft(Call[None]):
    def run(self, child: Child) -> None:
        child.runtime.clear_draft()


@dataclass(frozen=True, slots=True)
class Mode(Call[DraftMode]):
    def run(self, child: Child) -> DraftMode:
        return child.runtime.mode


@dataclass(frozen=True, slots=True)
class ChatPrompt(Call[list[int]]):
    messages: Sequence[ChatMessage]
    tools: ToolOffer | None = None

    def run(self, child: Child) -> list[int]:
        # A template may run for seconds before its budget ends it: the parent's Stop arrives
        # as a Control while it renders, as during a generation.
        control = GenerationControl()
        with _ControlReader(child.conn, control):
            return child.runtime.chat_prompt(self.messages, control, tools=self.tools)


@dataclass(frozen=True, slots=True)
class ToolDialectOf(Call[ToolDialect]):
    def run(self, child: Child) -> ToolDialect:
        return child.runtime.tool_dialect()


@dataclass(frozen=True, slots=True)
class TextPrompt(Call[list[int]]):
    text: str
    parse_special: bool = False

    def run(self, child: Child) -> list[int]:
        return child.runtime.text_prompt(self.text, parse_special=self.parse_special)


@dataclass(frozen=True, slots=True)
class Memory(Call[MemoryUsage]):
    def run(self, child: Child) -> MemoryUsage:
        return child.runtime.memory()


# -- generating, and the end ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Control:
    """The live switches of a generation (GenerationControl's), as they are now."""

    stop_requested: bool
    speculative: bool
    gamma: int | None

    @classmethod
    def of(cls, control: GenerationControl) -> Control:
        return cls(control.stop_requested, control.speculative, control.gamma)

    def apply(self, control: GenerationControl) -> None:
        if self.stop_requested:
            control.stop()  # its byte too, which a prompt batch reads (LlamaModel.stop_byte)
        control.speculative = self.speculative
        control.gamma = self.gamma


STOP = Control(stop_requested=True, speculative=False, gamma=None)


@dataclass(frozen=True, slots=True)
class Generate:
    prompt_ids: list[int]
    config: GenerationConfig
    control: Control


@dataclass(frozen=True, slots=True)
class Close:
    pass


Request = Call[Any] | Generate | Control | Close


# -- the answers ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Progress:
    fraction: float


@dataclass(frozen=True, slots=True)
class Returned:
    value: Any


@dataclass(frozen=True, slots=True)
class Raised:
    error: SpecChatError


@dataclass(frozen=True, slots=True)
class Done:
    pass


@dataclass(frozen=True, slots=True)
class PromptCached:
    """Sent before a reply's first event: EngineSession.prompt_cached, as the child's is."""

    tokens: int


@dataclass(frozen=True, slots=True)
class PromptRead:
    """How far a long prompt's pass has come: GenerationControl.prompt_read, as the child's is."""

    read: tuple[int, int] | None


Answer = Progress | Returned | Raised | Done | PromptCached | PromptRead | Event


# -- the child's loop -------------------------------------------------------------------------


def _redirect_output(log_path: str) -> None:
    # The parent shows the user one line made from llama.cpp's abort message, never the raw
    # dump on its own terminal.
    send_output_to_log(log_path)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    llama_log = logging.getLogger(LLAMA_LOG_NAME)
    llama_log.addHandler(handler)
    llama_log.setLevel(logging.DEBUG)  # "RPC server version mismatch" arrives as a log line


def _portable(exc: SpecChatError) -> SpecChatError:
    # An exception whose __init__ takes other arguments than its message cannot be unpickled;
    # send the same sentence under the common base class then.
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return SpecChatError(str(exc))
    return exc


def _send(conn: Connection, answer: Answer) -> None:
    conn.send(answer)


class _ControlReader:
    """The thread that receives on the pipe while a generation runs (see the module's text)."""

    def __init__(self, conn: Connection, control: GenerationControl) -> None:
        self._conn = conn
        self._control = control
        # The generation's end wakes the thread through a pipe of its own: only the parent
        # writes to the pipe the thread reads.
        self._wake_recv, self._wake_send = multiprocessing.Pipe(duplex=False)
        self._thread = threading.Thread(target=self._run, name="generation-control", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._wake_send.send_bytes(b"")
        self._thread.join()
        self._wake_send.close()
        self._wake_recv.close()

    def _run(self) -> None:
        while True:
            ready = wait([self._wake_recv, self._conn])
            if self._wake_recv in ready:
                return  # a Control still unread is stale: the main loop skips it
            try:
                change = self._conn.recv()
            except (EOFError, OSError):
                return  # the parent is gone; the main thread's next send or receive says so
            assert isinstance(change, Control)  # the parent sends nothing else mid-generation
            change.apply(self._control)


def _generate(conn: Connection, runtime: Runtime, request: Generate) -> None:
    # Sent from this thread, the one that sends every answer: the prompt's pass writes it.
    control = GenerationControl(on_prompt_read=lambda read: _send(conn, PromptRead(read)))
    request.control.apply(control)
    first = True
    with _ControlReader(conn, control):
        for event in runtime.generate(request.prompt_ids, request.config, control):
            if first:  # the prompt's pass has run
                _send(conn, PromptCached(runtime.prompt_cached))
                first = False
            _send(conn, event)
    _send(conn, Done())


def serve(conn: Connection, log_path: str, vet_draft: DraftVetter | None) -> None:
    """The child's main loop; returns when told to close or when the parent goes away."""
    _redirect_output(log_path)
    os.environ["GGML_NO_BACKTRACE"] = "1"  # an abort here is expected, not a bug to debug
    start_keepalive_thread()  # a vanished worker machine then ends this process too

    def progress(fraction: float) -> bool:
        _send(conn, Progress(fraction))
        return True

    child = Child(Runtime(vet_draft=vet_draft), progress, conn)
    try:
        while True:
            try:
                request: Request = conn.recv()
            except EOFError:
                return
            if isinstance(request, Close):
                _send(conn, Returned(None))
                return
            if isinstance(request, Control):
                continue  # a change that arrived after its generation ended
            try:
                if isinstance(request, Generate):
                    _generate(conn, child.runtime, request)
                else:
                    _send(conn, Returned(request.run(child)))
            except SpecChatError as exc:
                _send(conn, Raised(_portable(exc)))
    finally:
        child.runtime.close()
