"""What the window and the engine worker say to each other: requests in, states and failures
out, all plain immutable data (the worker's thread boundary, ui/workers/engine.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.job_queue import Job, Sink, Ticket
from app.engine.runtime import MemoryUsage
from app.engine.session import EngineSession
from app.engine.tool_calls import DESCRIBED, ToolDialect
from app.llama.config import ModelConfig
from app.llama.rpc import WorkerMemory
from models.demo import DemoModels

DraftKind = Literal["none", "ngram", "model"]


class LoadTicket:
    """Cancels one load request; set from the UI thread, read by the loading thread."""

    def __init__(self) -> None:
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()


@dataclass(frozen=True, slots=True)
class DraftChoice:
    kind: DraftKind
    config: ModelConfig | None = None

    @property
    def path(self) -> str | None:
        return self.config.path if self.config else None


@dataclass(frozen=True, slots=True)
class LoadRequest:
    """Make the worker hold this target and draft. target None means the demo pair."""

    target: ModelConfig | None
    draft: DraftChoice | None  # None with a demo target means the demo's Q4_1 draft
    ticket: LoadTicket = field(default_factory=LoadTicket, compare=False)
    demo_folder: Path | None = None  # where demo files are derived; None = the default
    # Settings for the demo pair (their paths are filled in once the demo files exist).
    demo_target: ModelConfig = field(default_factory=lambda: ModelConfig(""))
    demo_draft: ModelConfig = field(default_factory=lambda: ModelConfig(""))


@dataclass(frozen=True, slots=True)
class LoadedState:
    """What the worker holds now; sent after every load, failed or not."""

    target: ModelConfig | None
    draft: DraftChoice
    memory: MemoryUsage
    demo: DemoModels | None
    # Each RPC worker's free/total memory as it reported it after the load; empty when local.
    workers: tuple[WorkerMemory, ...] = ()
    tool_dialect: ToolDialect = DESCRIBED  # how the target's chat template offers functions

    @property
    def remote(self) -> bool:
        """The models run in the child process that talks to RPC workers."""
        return self.target is not None and bool(
            self.target.rpc_servers or (self.draft.config and self.draft.config.rpc_servers)
        )

    @property
    def remote_free_bytes(self) -> int:
        """Free memory of the workers holding the target's layers: what a memory-fit estimate
        (models.memory.plan_fit's remote_free_bytes) may count besides local VRAM."""
        endpoints = self.target.rpc_servers if self.target is not None else ()
        return sum(w.free_bytes for w in self.workers if w.endpoint in endpoints)


@dataclass(frozen=True, slots=True)
class LoadFailure:
    message: str
    cancelled: bool
    state: LoadedState


@dataclass(frozen=True, slots=True)
class GenerateRequest:
    request_id: int
    messages: tuple[ChatMessage, ...]
    config: GenerationConfig
    control: GenerationControl


RuntimeTask = Callable[[EngineSession], None]
RemoteRuntimeFactory = Callable[[], EngineSession]
FileCheck = Callable[[str], None]
"""Raises a user error for a model file llama.cpp must not load (models.probe.ensure_loadable)."""


@dataclass(frozen=True, slots=True)
class ServeRequest:
    """A local server job for the worker: closed() says the server stopped meanwhile."""

    job: Job
    sink: Sink
    ticket: Ticket
    closed: Callable[[], bool]


@dataclass(frozen=True, slots=True)
class GenerationFailure:
    request_id: int
    message: str
