"""An EngineSession with the models in a child process, for models whose layers run on RPC workers.

llama.cpp aborts the whole process when a worker is unreachable at connect time, answers in
another protocol version or in garbage, or drops its connection mid-reply. Here that process is
a child: its death becomes one typed error (app/errors.py) in the parent, the tokens already
streamed stay with the caller, and the window or CLI carries on. The child speaks the same
events and results as Runtime (app/engine/isolated_child.py is the other end of the pipe, and
defines each message that crosses it).

Never a hang: each worker is first reached with a plain TCP connect under a timeout, the RPC
handshake must finish within HANDSHAKE_TIMEOUT_S, and the child switches TCP keepalive on for
its worker connections (app/llama/rpc_keepalive.py), so a worker machine that vanished
mid-reply drops the connection, which ends the child like a killed worker does.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TypeVar

from app.engine import isolated_child as child
from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.crash_log import crash_error
from app.engine.events import Event
from app.engine.runtime import DraftVetter, Runtime
from app.engine.session import EngineSession
from app.engine.tool_calls import ToolDialect, ToolOffer
from app.errors import Cancelled, RpcConnectError, SpecChatError
from app.llama import rpc
from app.llama.config import ModelConfig
from app.llama.facts import NO_MEMORY, MemoryUsage, ModelFacts
from app.llama.model import LoadProgress
from app.metrics.rounds import DraftMode

HANDSHAKE_TIMEOUT_S = 6.0
AFTER_LOSS = (
    "the reply so far is kept. Check that the worker is still running, then load the model again"
)
_POLL_S = 0.25
T = TypeVar("T")


class IsolatedRuntime:
    """Load, prompt, generate, stop and close, as Runtime does, in a disposable child process."""

    def __init__(
        self, *, vet_draft: DraftVetter | None = None, after_loss: str = AFTER_LOSS
    ) -> None:
        """after_loss: what the user reads after a worker took the models down (a server
        that loads them again by itself says so)."""
        self._vet_draft = vet_draft
        self._after_loss = after_loss
        self._proc: Any = None  # multiprocessing's SpawnProcess
        self._conn: Connection | None = None
        self._endpoints: list[str] = []
        self._log_path = ""
        self._mode: DraftMode = "plain"
        self._target: ModelFacts | None = None
        self._prompt_cached = 0

    @property
    def prompt_cached(self) -> int:
        return self._prompt_cached

    @property
    def target_facts(self) -> ModelFacts | None:
        return self._target

    @property
    def target(self) -> ModelFacts | None:
        """The loaded target's facts, or None: reads as Runtime.target does for callers that
        check for a target or read its path and context size."""
        return self._target

    # -- child lifetime -------------------------------------------------------------------------

    def _ensure_child(self) -> Connection:
        if self._conn is not None and self._proc is not None and self._proc.is_alive():
            return self._conn
        self._discard_child()
        context = multiprocessing.get_context("spawn")  # no fork: llama.cpp holds threads
        parent_end, child_end = context.Pipe()
        fd, self._log_path = tempfile.mkstemp(prefix="specchat-engine-", suffix=".log")
        os.close(fd)
        self._proc = context.Process(
            target=child.serve, args=(child_end, self._log_path, self._vet_draft), daemon=True
        )
        self._proc.start()
        child_end.close()  # so the parent sees EOF the moment the child dies
        self._conn = parent_end
        return parent_end

    def _discard_child(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join(timeout=5)
        self._conn, self._proc = None, None
        self._endpoints = []
        self._mode = "plain"
        self._target = None
        if self._log_path:
            with contextlib.suppress(OSError):
                os.unlink(self._log_path)
            self._log_path = ""

    def _child_log(self) -> str:
        try:
            return Path(self._log_path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def _death(self, *, connecting: str | None = None) -> SpecChatError:
        """The error that says why the child died, made from what llama.cpp wrote before."""
        if self._proc is not None:
            self._proc.join(timeout=5)
        code = self._proc.exitcode if self._proc is not None else None
        log = self._child_log()
        endpoints = list(self._endpoints)
        self._discard_child()
        return crash_error(
            log,
            endpoints,
            afterwards=self._after_loss,
            ended=f"the model process stopped unexpectedly (exit code {code})",
            connecting=connecting,
        )

    def _receive(
        self,
        *,
        timeout: float | None = None,
        connecting: str | None = None,
        on_wait: Callable[[], None] | None = None,
    ) -> child.Answer:
        """The child's next message; its death or silence becomes a typed error.

        on_wait runs between polls, e.g. to pass a Stop on while the child is busy."""
        conn = self._conn
        assert conn is not None
        start = time.monotonic()
        while True:
            if on_wait is not None:
                on_wait()
            try:
                if conn.poll(_POLL_S):
                    answer: child.Answer = conn.recv()
                    return answer
            except (EOFError, OSError):
                raise self._death(connecting=connecting) from None
            if self._proc is None or not self._proc.is_alive():
                raise self._death(connecting=connecting)
            now = time.monotonic()
            if timeout is not None and now - start > timeout:
                assert connecting is not None
                self._discard_child()
                raise RpcConnectError(
                    connecting,
                    f"no RPC handshake within {timeout:.0f} s (is it a `specchat worker` of "
                    "the same version?)",
                )

    def _send(self, request: child.Request, *, connecting: str | None = None) -> Connection:
        conn = self._ensure_child()
        try:
            conn.send(request)
        except (OSError, ValueError):
            raise self._death(connecting=connecting) from None
        return conn

    def _call(
        self,
        call: child.Call[T],
        *,
        connecting: str | None = None,
        progress: LoadProgress | None = None,
        control: GenerationControl | None = None,
    ) -> T:
        """The call's value. `control`: a Stop on it is passed on while the child runs the call
        (which must watch for it: ChatPrompt)."""
        conn = self._send(call, connecting=connecting)
        timeout = HANDSHAKE_TIMEOUT_S if connecting is not None else None
        stop_sent = False

        def pass_stop_on() -> None:
            nonlocal stop_sent
            if control is not None and control.stop_requested and not stop_sent:
                stop_sent = True
                with contextlib.suppress(OSError, ValueError):  # a dead child is seen next poll
                    conn.send(child.STOP)

        while True:
            answer = self._receive(timeout=timeout, connecting=connecting, on_wait=pass_stop_on)
            if not isinstance(answer, child.Progress):
                break
            if progress is not None and not progress(answer.fraction):
                # The child is inside llama.cpp's load and cannot be asked; end it instead.
                self._discard_child()
                raise Cancelled("model loading cancelled")
        if isinstance(answer, child.Raised):
            raise answer.error
        assert isinstance(answer, child.Returned), answer
        value: T = answer.value
        return value

    # -- loading --------------------------------------------------------------------------------

    def connect(self, endpoints: Sequence[str]) -> list[rpc.Device]:
        """Register workers in the child (reachability first, then the RPC handshake)."""
        rpc.require_rpc()
        found: list[rpc.Device] = []
        if endpoints:
            # Start the child and load llama.cpp there first: the handshake timeout below
            # must time the worker, not a slow process start on a busy machine.
            self._call(child.Ready())
        for endpoint in endpoints:
            if endpoint in self._endpoints:
                continue
            rpc.check_reachable(endpoint)
            # The child learns the worker's key with it (KEY@HOST:PORT), never through files.
            spec = rpc.connect_spec(endpoint)
            devices = self._call(child.Connect(spec), connecting=endpoint)
            found.extend(devices)
            self._endpoints.append(endpoint)
        return found

    def load_target(self, config: ModelConfig, progress: LoadProgress | None = None) -> ModelFacts:
        # A fresh child per target: llama.cpp cannot forget a registered worker.
        self._discard_child()
        self.connect(config.rpc_servers)
        facts = self._call(child.LoadTarget(config), progress=progress)
        self._mode = "plain"
        self._target = facts
        return facts

    def load_draft(
        self,
        config: ModelConfig,
        progress: LoadProgress | None = None,
        *,
        vetted: bool = False,
        joined: bool | None = None,
    ) -> ModelFacts:
        self.connect(config.rpc_servers)
        facts = self._call(child.LoadDraft(config, vetted, joined), progress=progress)
        self._mode = self._call(child.Mode())
        return facts

    def check_draft(self, draft: Path) -> None:
        self._call(child.CheckDraft(draft))

    def use_suffix_index(self) -> None:
        self._call(child.UseSuffixIndex())
        self._mode = self._call(child.Mode())

    def clear_draft(self) -> None:
        if self._conn is not None:
            self._call(child.ClearDraft())
        self._mode = "plain"

    def unload(self) -> None:
        self._discard_child()

    # -- prompts and generating -----------------------------------------------------------------

    def chat_prompt(
        self,
        messages: Sequence[ChatMessage],
        control: GenerationControl | None = None,
        tools: ToolOffer | None = None,
    ) -> list[int]:
        # The child renders with its own time and size budget; a Stop ends it sooner.
        return self._call(child.ChatPrompt(list(messages), tools), control=control)

    def tool_dialect(self) -> ToolDialect:
        return self._call(child.ToolDialectOf())

    def text_prompt(self, text: str, *, parse_special: bool = False) -> list[int]:
        return self._call(child.TextPrompt(text, parse_special))

    @property
    def mode(self) -> DraftMode:
        return self._mode

    def generate(
        self,
        prompt_ids: Sequence[int],
        config: GenerationConfig,
        control: GenerationControl | None = None,
    ) -> Iterator[Event]:
        """Stream the child's events; a dead worker raises RpcWorkerLostError after the tokens
        that did arrive, so the caller keeps the partial reply."""
        live = control or GenerationControl()
        sent = child.Control.of(live)
        conn = self._send(child.Generate(list(prompt_ids), config, sent))

        def forward_changes() -> None:
            # The user's Stop, γ and speculation switches reach the child as they happen.
            nonlocal sent
            now = child.Control.of(live)
            if now != sent:
                sent = now
                with contextlib.suppress(OSError, ValueError):  # a dead child is seen next poll
                    conn.send(now)

        finished = False
        try:
            while True:
                answer = self._receive(on_wait=forward_changes)
                if isinstance(answer, child.Done):
                    finished = True
                    return
                if isinstance(answer, child.Raised):
                    finished = True
                    raise answer.error
                if isinstance(answer, child.PromptCached):
                    self._prompt_cached = answer.tokens
                    continue
                if isinstance(answer, child.PromptRead):
                    live.read_prompt(answer.read)  # the window shows "Reading the prompt… N %"
                    continue
                assert not isinstance(answer, child.Progress | child.Returned), answer
                yield answer
        finally:
            if not finished and self._conn is not None:
                self._drain_after_abandon()

    def _drain_after_abandon(self) -> None:
        # The caller stopped reading early: stop the child and wait for its end of the stream.
        assert self._conn is not None
        with contextlib.suppress(OSError, ValueError):
            self._conn.send(child.STOP)
        try:
            while True:
                if isinstance(self._receive(), child.Done | child.Raised):
                    return
        except SpecChatError:
            return

    def memory(self) -> MemoryUsage:
        if self._conn is None:
            return NO_MEMORY
        return self._call(child.Memory())

    def worker_memory(self) -> list[rpc.WorkerMemory]:
        """Each connected worker's free/total memory, asked over the model's own connection
        (a worker serves one client at a time, so a second connection would wait)."""
        if self._conn is None or not self._endpoints:
            return []
        return self._call(child.WorkerMemory())

    def close(self) -> None:
        if self._conn is not None and self._proc is not None and self._proc.is_alive():
            with contextlib.suppress(Exception):
                self._conn.send(child.Close())
                if self._conn.poll(5):
                    self._conn.recv()
        self._discard_child()


def probe_workers(endpoints: Sequence[str]) -> list[rpc.WorkerMemory]:
    """Free/total memory of idle workers, asked from a throwaway child (safe if one is down)."""
    runtime = IsolatedRuntime()
    try:
        runtime.connect(endpoints)
        return runtime.worker_memory()
    finally:
        runtime.close()


# What the composition roots hold, a Runtime or an IsolatedRuntime when models use workers,
# is an EngineSession; mypy checks here that both are.
_IN_PROCESS: type[EngineSession] = Runtime
_IN_CHILD: type[EngineSession] = IsolatedRuntime
