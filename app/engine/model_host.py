"""What models are held, and how a load request changes them; Qt-free.

The window runs a ModelHost on its engine thread (ui/workers/engine.py turns its results into
Qt signals). It holds one EngineSession at a time: the in-process Runtime for local models, or
an IsolatedRuntime (a child process that may die without taking the window along) for models on
RPC workers, made when a load asks for workers and closed when the models come home. A load
changes only what differs from what is held, the target first; a load that fails gets back to
the models held before, so the app keeps working.

Model management (models/) sits above app/, which never imports it: the check that refuses a
file llama.cpp would abort on and the preparation of the demo files come in as callables.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Generic, Literal, Protocol, TypeVar

from app.engine.isolated import IsolatedRuntime
from app.engine.job_queue import JobRunner
from app.engine.runtime import Runtime
from app.engine.session import EngineSession
from app.engine.tool_calls import DESCRIBED, ToolDialect
from app.errors import Cancelled, SpecChatError
from app.llama.config import ModelConfig
from app.llama.facts import NO_MEMORY, MemoryUsage
from app.llama.rpc import WorkerMemory

log = logging.getLogger(__name__)

DraftKind = Literal["none", "ngram", "model"]


class LoadTicket:
    """Cancels one load request; set from any thread, read by the loading thread."""

    def __init__(self) -> None:
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()


@dataclass(frozen=True, slots=True)
class DraftSetting:
    """What drafts beside the target: nothing, the suffix index alone ("ngram"), or a draft
    model with its config, drafting together with the suffix index unless `with_history` is
    off (the hybrid, app/engine/hybrid_drafter.py)."""

    kind: DraftKind
    config: ModelConfig | None = None
    with_history: bool = True

    @property
    def path(self) -> str | None:
        return self.config.path if self.config else None


NO_DRAFT = DraftSetting("none")


class DemoFiles(Protocol):
    """The demo pair a request without a target loads (models.demo.DemoModels)."""

    @property
    def target(self) -> Path: ...

    @property
    def q4_1(self) -> Path:
        """The draft loaded with the demo target when the request names none."""
        ...


DemoT = TypeVar("DemoT", bound=DemoFiles)

DemoPreparer = Callable[[Callable[[int, int, str], None], Path | None], DemoT]
"""prepare(progress(done, total, message), folder) -> the demo files, derived where missing
(models.demo.ensure_demo_models); folder None means the default one."""
StageProgress = Callable[[str, float], None]
"""progress(stage text, 0..1) while demo files are prepared or models load."""
FileCheck = Callable[[str], None]
"""Raises a user error for a model file llama.cpp must not load (models.probe.ensure_loadable)."""
RemoteRuntimeFactory = Callable[[], EngineSession]


@dataclass(frozen=True, slots=True)
class LoadRequest:
    """Hold this target and draft. target None means the demo pair."""

    target: ModelConfig | None
    draft: DraftSetting | None  # None with a demo target means the demo's Q4_1 draft
    ticket: LoadTicket = field(default_factory=LoadTicket, compare=False)
    demo_folder: Path | None = None  # where demo files are derived; None = the default
    # Settings for the demo pair (their paths are filled in once the demo files exist).
    demo_target: ModelConfig = field(default_factory=lambda: ModelConfig(""))
    demo_draft: ModelConfig = field(default_factory=lambda: ModelConfig(""))
    demo_draft_with_history: bool = True


# No slots: a generic frozen dataclass with slots fails when called as LoadedState[X](...).
@dataclass(frozen=True)
class LoadedState(Generic[DemoT]):
    """What the host holds now; reported after every load, failed or not."""

    target: ModelConfig | None
    draft: DraftSetting
    memory: MemoryUsage
    demo: DemoT | None
    # Each RPC worker's free/total memory as it reported it after the load; empty when local.
    workers: tuple[WorkerMemory, ...] = ()
    tool_dialect: ToolDialect = DESCRIBED  # how the target's chat template offers functions
    context_note: str | None = None  # ModelFacts.context_note of the target

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


def _ignore_progress(_stage: str, _fraction: float) -> None:
    return None


class ModelHost(Generic[DemoT]):
    """Owns the loaded models; every method runs on the one thread that owns them."""

    def __init__(
        self,
        local: EngineSession,
        *,
        remote_runtime: RemoteRuntimeFactory,
        check_file: FileCheck,
        prepare_demo: DemoPreparer[DemoT],
        progress: StageProgress = _ignore_progress,
    ) -> None:
        self._local = local
        self._new_remote = remote_runtime
        self._runtime = local
        self._remote = False
        self._check_file = check_file
        self._prepare_demo_files = prepare_demo
        self._progress = progress
        # Local server requests run on the models the chat uses: one owner per model.
        self.jobs = JobRunner(local)
        self._target: ModelConfig | None = None
        self._draft = NO_DRAFT
        self._demo: DemoT | None = None
        # The token ids of the chat's last exchange, for read_chat_back.
        self._chat_tokens: list[int] = []

    @property
    def runtime(self) -> EngineSession:
        """The session holding the models now (replaced when a load switches local/remote)."""
        return self._runtime

    # -- loading ------------------------------------------------------------------------------

    def load(self, request: LoadRequest) -> LoadedState[DemoT]:
        """Hold the request's models and say what is held.

        A failure gets back to the previous models (state() says what that achieved) and is
        raised; as Cancelled when the request was cancelled, whatever failed.
        """
        previous = (self._target, self._draft)
        try:
            target, draft = self._resolve(request)
            self._apply(target, draft, request.ticket)
        except Exception as exc:
            cancelled = request.ticket.cancelled and not isinstance(exc, Cancelled)
            self._restore(*previous, cancelled=cancelled or isinstance(exc, Cancelled))
            if cancelled:
                raise Cancelled("model loading cancelled") from exc
            raise
        return self.state()

    def _resolve(self, request: LoadRequest) -> tuple[ModelConfig, DraftSetting]:
        if request.target is not None:
            return request.target, request.draft or NO_DRAFT
        demo = self._demo or self._prepare_demo(request.ticket, request.demo_folder)
        target = replace(request.demo_target, path=str(demo.target))
        draft = request.draft or DraftSetting(
            "model",
            replace(request.demo_draft, path=str(demo.q4_1)),
            request.demo_draft_with_history,
        )
        return target, draft

    def _prepare_demo(self, ticket: LoadTicket, folder: Path | None) -> DemoT:
        def progress(done: int, total: int, message: str) -> None:
            if ticket.cancelled:  # e.g. the window closes during the first run's derivation
                raise Cancelled("model loading cancelled")
            self._progress(message[0].upper() + message[1:], done / max(total, 1))

        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        demo = self._prepare_demo_files(progress, folder)
        if ticket.cancelled:
            raise Cancelled("model loading cancelled")
        self._demo = demo
        return demo

    def _use_runtime(self, *, remote: bool) -> None:
        """Hold the runtime kind these models need, the other one's models freed first."""
        if remote == self._remote:
            return
        if self._remote:
            self._runtime.close()  # ends the child process and its worker connections
        else:
            self._runtime.unload()
        self._target, self._draft = None, NO_DRAFT
        self._runtime = self._new_remote() if remote else self._local
        self._remote = remote
        # The same runner (the local server holds it, with its counters) serves the new one.
        self.jobs.use_runtime(self._runtime)

    def _apply(self, target: ModelConfig, draft: DraftSetting, ticket: LoadTicket) -> None:
        """Load what differs from what is held: the target first, then the draft."""
        draft_workers = draft.config.rpc_servers if draft.config is not None else ()
        self._use_runtime(remote=bool(target.rpc_servers or draft_workers))
        if target != self._target or self._runtime.target_facts is None:
            # Forget the draft too: it was vetted against the old target. The chat's token
            # ids were the old target's.
            self._target, self._draft = None, NO_DRAFT
            self._chat_tokens = []
            # A file llama.cpp would abort on is refused in words before it can take the
            # process down (checked once per file, in a child process; cached).
            self._check_file(target.path)
            self._runtime.load_target(target, self._stage(target.path, ticket, "target"))
            self._target = target
        if draft != self._draft:
            self._draft = NO_DRAFT
            if draft.kind == "model" and draft.config is not None:
                self._check_file(draft.config.path)
                self._runtime.load_draft(
                    draft.config,
                    self._stage(draft.config.path, ticket, "draft"),
                    joined=draft.with_history,
                )
            elif draft.kind == "ngram":
                self._runtime.use_suffix_index()
            else:
                self._runtime.clear_draft()
            self._draft = draft

    def _stage(self, path: str, ticket: LoadTicket, role: str) -> _LoadStage:
        return _LoadStage(self._progress, f"Loading {role} {Path(path).name}", ticket)

    def _restore(self, target: ModelConfig | None, draft: DraftSetting, *, cancelled: bool) -> None:
        """After a failed load, get back to the previous models so the app keeps working.

        A target that loaded stays when only its draft failed (refused, missing, broken): the
        user asked for it, and it works alone; the draft's error says what went wrong. A
        cancelled load of a new pair brings the previous pair back instead."""
        # A child process that died with the draft took the target too: not loaded then.
        target_loaded = (
            self._target is not None and self._runtime.target_facts is not None and not cancelled
        )
        if target_loaded or self._target == target:
            # Only the draft failed: keep the target, drafting nothing, or with the previous
            # draft when the target is the previous one.
            self._runtime.clear_draft()
            self._draft = NO_DRAFT
            if self._target == target and draft.kind != "none":
                self._try_apply(target, draft)
            return
        self._runtime.unload()
        self._target, self._draft = None, NO_DRAFT
        if target is not None:
            self._try_apply(target, draft)

    def _try_apply(self, target: ModelConfig | None, draft: DraftSetting) -> None:
        if target is None:
            return
        try:
            self._apply(target, draft, LoadTicket())
        except Exception as exc:
            # A bug (not a user error) keeps its traceback in the log.
            bug = not isinstance(exc, SpecChatError)
            log.warning("could not restore the previous models: %s", exc, exc_info=bug)

    # -- what is held -------------------------------------------------------------------------

    def state(self) -> LoadedState[DemoT]:
        memory = self.memory_now()
        workers = self._worker_memory() if memory is not None else ()
        if self._runtime.target_facts is None:  # none loaded, or the child died as it was asked
            return LoadedState(None, NO_DRAFT, NO_MEMORY, self._demo)
        facts = self._runtime.target_facts
        try:
            dialect = self._runtime.tool_dialect()
        except SpecChatError:
            dialect = DESCRIBED
        return LoadedState(
            self._target,
            self._draft,
            memory or NO_MEMORY,
            self._demo,
            workers,
            dialect,
            facts.context_note() if facts is not None else None,
        )

    def memory_now(self) -> MemoryUsage | None:
        """What the loaded models hold as of now (saved conversations grow with every reply);
        None with none loaded or when the child cannot answer. The local server's health
        reports the same figure from then on, so a request's end reads it once, not twice."""
        memory: MemoryUsage | None = None
        if self._runtime.target_facts is not None:
            try:
                memory = self._runtime.memory()
            except SpecChatError as exc:  # the child died as it was asked
                log.warning("could not read the models' memory: %s", exc)
        self.jobs.note_memory(memory)
        return memory

    def _worker_memory(self) -> tuple[WorkerMemory, ...]:
        if not isinstance(self._runtime, IsolatedRuntime):
            return ()
        try:
            return tuple(self._runtime.worker_memory())
        except SpecChatError as exc:
            log.warning("could not read the RPC workers' memory: %s", exc)
            return ()

    def check_lost(self) -> LoadedState[DemoT] | None:
        """After a failed job: what is held now if the models went with it (an RPC worker
        died), else None."""
        if self._target is not None and self._runtime.target_facts is None:
            self._target, self._draft = None, NO_DRAFT
            return self.state()
        return None

    # -- the chat's caches --------------------------------------------------------------------

    def remember_chat(self, token_ids: list[int]) -> None:
        """The token ids of the chat's last exchange (prompt and reply), for read_chat_back."""
        self._chat_tokens = token_ids

    def read_chat_back(self) -> None:
        """Feed the chat's last exchange back into the caches after other work took them, so
        the next reply does not re-read the whole conversation before its first token."""
        runtime, tokens = self._runtime, self._chat_tokens
        if len(tokens) < 2 or not isinstance(runtime, Runtime):
            return
        if runtime.target is None or runtime.target.tokens == tokens[:-1]:
            return
        try:
            runtime.target.feed(tokens[:-1], 0)
            if runtime.drafter is not None:
                runtime.drafter.prefill(tokens[:-1])
        except Exception as exc:  # the next reply reads the chat itself, as it would have
            log.warning("could not read the chat back after a server request: %s", exc)

    def close(self) -> None:
        """Free every model and end the child process, if any."""
        self._runtime.close()
        if self._runtime is not self._local:
            self._local.close()
        self._target, self._draft = None, NO_DRAFT


class _LoadStage:
    """llama.cpp's load progress callback: throttled reports out, the cancel flag in."""

    def __init__(self, progress: StageProgress, stage: str, ticket: LoadTicket) -> None:
        self._progress = progress
        self._stage = stage
        self._ticket = ticket
        self._last = -1.0

    def __call__(self, fraction: float) -> bool:
        # llama.cpp calls this per tensor; a report per percent is plenty for a progress bar.
        if fraction - self._last >= 0.01 or fraction >= 1.0:
            self._last = fraction
            self._progress(self._stage, fraction)
        return not self._ticket.cancelled
