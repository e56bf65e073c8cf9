"""ModelHost on stand-in models (tests.helpers.fake_model): what a load holds, what a failed or
cancelled load gets back to, and the switch to the child-process session for RPC workers.

The sessions are real Runtimes over stand-in models; the "remote" one is a second Runtime that
records being closed, as the window's IsolatedRuntime would end its child process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.engine.config import GenerationConfig
from app.engine.job_driver import Job, Ticket
from app.engine.model_host import (
    NO_DRAFT,
    DraftSetting,
    LoadRequest,
    LoadTicket,
    ModelHost,
)
from app.engine.runtime import Runtime
from app.errors import Cancelled, DraftIncompatibleError, ModelLoadError
from app.llama.config import ModelConfig
from tests.helpers.fake_model import FakeModel

WORKER = "127.0.0.1:50052"
CONFIG = GenerationConfig(max_tokens=2)
TARGET = ModelConfig("target.gguf", n_ctx=256)
OTHER_TARGET = ModelConfig("second-target.gguf", n_ctx=256)
BROKEN = ModelConfig("broken-target.gguf", n_ctx=256)
DRAFT = DraftSetting("model", ModelConfig("small-draft.gguf", n_ctx=256))
REFUSED = DraftSetting("model", ModelConfig("other-vocab-draft.gguf", n_ctx=256))
BROKEN_DRAFT = DraftSetting("model", ModelConfig("broken-draft.gguf", n_ctx=256))


def _vet(draft: Path, target: str) -> None:
    """The vocabulary check, played: a draft named "other-vocab…" does not fit any target."""
    if draft.name.startswith("other-vocab"):
        raise DraftIncompatibleError(draft.name, Path(target).name, "different vocabulary")


class StandInRemote(Runtime):
    def __init__(self) -> None:
        super().__init__(vet_draft=_vet, open_model=FakeModel.factory(step_s=0))
        self.closed = False
        self.prompts: list[str] = []

    def text_prompt(self, text: str, *, parse_special: bool = False) -> list[int]:
        self.prompts.append(text)
        return super().text_prompt(text, parse_special=parse_special)

    def close(self) -> None:
        self.closed = True
        super().close()


@dataclass(frozen=True)
class StandInDemo:
    target: Path
    q4_1: Path


class Demo:
    """Prepares the demo pair, reporting one step; `during` runs inside the preparation."""

    def __init__(self, during: Callable[[], None] = lambda: None) -> None:
        self.during = during
        self.calls: list[Path | None] = []

    def __call__(
        self, progress: Callable[[int, int, str], None], folder: Path | None
    ) -> StandInDemo:
        self.calls.append(folder)
        self.during()
        progress(1, 4, "writing demo-target.gguf")
        return StandInDemo(Path("demo-target.gguf"), Path("demo-draft.gguf"))


class Host:
    """A host with its sessions, demo and progress reports in view."""

    def __init__(
        self, *, demo: Demo | None = None, check_file: Callable[[str], None] = lambda _p: None
    ) -> None:
        self.local = Runtime(vet_draft=_vet, open_model=FakeModel.factory(step_s=0))
        self.remotes: list[StandInRemote] = []
        self.reports: list[tuple[str, float]] = []
        self.demo = demo or Demo()
        self.checked: list[str] = []

        def check(path: str) -> None:
            self.checked.append(path)
            check_file(path)

        self.host: ModelHost[StandInDemo] = ModelHost(
            self.local,
            remote_runtime=self._remote,
            check_file=check,
            prepare_demo=self.demo,
            progress=lambda stage, fraction: self.reports.append((stage, fraction)),
        )

    def _remote(self) -> StandInRemote:
        self.remotes.append(StandInRemote())
        return self.remotes[-1]


@pytest.fixture
def held() -> Host:
    return Host()


def test_nothing_is_held_before_the_first_load(held: Host) -> None:
    state = held.host.state()
    assert (state.target, state.draft, state.demo, state.workers) == (None, NO_DRAFT, None, ())
    assert held.host.runtime is held.local


def test_the_state_reports_the_target_and_draft_held(held: Host) -> None:
    state = held.host.load(LoadRequest(TARGET, DRAFT))
    assert (state.target, state.draft, state.remote) == (TARGET, DRAFT, False)
    assert held.local.target_facts is not None and held.local.mode != "plain"
    assert held.checked == [TARGET.path, "small-draft.gguf"]  # both files vetted before loading
    # Progress reports name the stage and end at 1.0 for each model.
    assert ("Loading target target.gguf", 1.0) in held.reports
    assert ("Loading draft small-draft.gguf", 1.0) in held.reports


def test_the_suffix_index_alone_and_no_draft_are_held_as_asked(held: Host) -> None:
    assert held.host.load(LoadRequest(TARGET, DraftSetting("ngram"))).draft == DraftSetting("ngram")
    assert held.local.mode != "plain"
    assert held.host.load(LoadRequest(TARGET, None)).draft == NO_DRAFT
    assert held.local.mode == "plain"


def test_a_request_without_a_target_loads_the_demo_pair_prepared_once(
    held: Host, tmp_path: Path
) -> None:
    folder = tmp_path / "models" / "demo"
    request = LoadRequest(None, None, demo_folder=folder, demo_target=ModelConfig("", n_ctx=256))
    state = held.host.load(request)
    assert state.demo == StandInDemo(Path("demo-target.gguf"), Path("demo-draft.gguf"))
    assert state.target is not None and state.target.path == "demo-target.gguf"
    assert state.target.n_ctx == 256  # the request's settings, the demo's path
    assert state.draft.path == "demo-draft.gguf"
    assert ("Writing demo-target.gguf", 0.25) in held.reports
    assert folder.is_dir()  # made for the preparation to write into
    held.host.load(LoadRequest(None, NO_DRAFT))
    assert held.demo.calls == [folder]  # the files are prepared once, then remembered


def test_a_failed_target_load_gets_the_previous_models_back(held: Host) -> None:
    held.host.load(LoadRequest(TARGET, DRAFT))
    with pytest.raises(ModelLoadError):
        held.host.load(LoadRequest(BROKEN, DRAFT))
    state = held.host.state()
    assert (state.target, state.draft) == (TARGET, DRAFT)
    assert held.local.target is not None and held.local.target.config.path == TARGET.path


def test_a_refused_draft_keeps_the_target_with_no_draft(held: Host) -> None:
    held.host.load(LoadRequest(TARGET, DRAFT))
    with pytest.raises(DraftIncompatibleError):
        held.host.load(LoadRequest(TARGET, REFUSED))
    # Same target: its previous draft comes back.
    assert (held.host.state().target, held.host.state().draft) == (TARGET, DRAFT)
    with pytest.raises(DraftIncompatibleError):
        held.host.load(LoadRequest(OTHER_TARGET, REFUSED))
    # A new target with a draft it refuses: the new target stays, drafting nothing.
    state = held.host.state()
    assert (state.target, state.draft) == (OTHER_TARGET, NO_DRAFT)
    assert held.local.mode == "plain"


@pytest.mark.parametrize("held_before", [None, TARGET])
def test_a_draft_file_that_fails_to_load_keeps_the_new_target_with_no_draft(
    held: Host, held_before: ModelConfig | None
) -> None:
    """A remembered draft deleted or broken since the last start must not cost the target."""
    if held_before is not None:
        held.host.load(LoadRequest(held_before, DRAFT))
    with pytest.raises(ModelLoadError):
        held.host.load(LoadRequest(OTHER_TARGET, BROKEN_DRAFT))
    state = held.host.state()
    assert (state.target, state.draft) == (OTHER_TARGET, NO_DRAFT)
    assert held.local.target is not None and held.local.mode == "plain"


def test_a_new_pair_cancelled_while_its_draft_fails_brings_the_previous_pair_back() -> None:
    ticket = LoadTicket()

    def check(path: str) -> None:
        if path == "broken-draft.gguf":
            ticket.cancel()  # the user cancels as the draft fails for its own reason
            raise ModelLoadError(path, "truncated")

    held = Host(check_file=check)
    held.host.load(LoadRequest(TARGET, DRAFT))
    with pytest.raises(Cancelled):
        held.host.load(LoadRequest(OTHER_TARGET, BROKEN_DRAFT, ticket=ticket))
    state = held.host.state()
    assert (state.target, state.draft) == (TARGET, DRAFT)


def test_models_on_workers_run_in_the_child_process_session_and_come_back(held: Host) -> None:
    held.host.load(LoadRequest(TARGET, DRAFT))
    remote_target = ModelConfig("target.gguf", n_ctx=256, rpc_servers=(WORKER,))
    state = held.host.load(LoadRequest(remote_target, DRAFT))
    [remote] = held.remotes
    assert held.host.runtime is remote and state.remote and state.target == remote_target
    assert held.local.target_facts is None  # the local copies are freed first
    # The local server's jobs follow the switch.
    held.host.jobs.run(Job(CONFIG, prompt="hello"), lambda _event: None, Ticket(1))
    assert remote.prompts == ["hello"]
    state = held.host.load(LoadRequest(TARGET, DRAFT))
    assert held.host.runtime is held.local and not state.remote
    assert remote.closed and held.local.target_facts is not None
    # A local draft beside a target on workers also needs the child process, a fresh one.
    remote_draft = DraftSetting("model", ModelConfig("small-draft.gguf", rpc_servers=(WORKER,)))
    held.host.load(LoadRequest(TARGET, remote_draft))
    assert len(held.remotes) == 2 and held.host.runtime is held.remotes[1]


def test_cancelling_during_demo_preparation_raises_cancelled() -> None:
    ticket = LoadTicket()
    held = Host(demo=Demo(during=ticket.cancel))
    with pytest.raises(Cancelled):
        held.host.load(LoadRequest(None, None, ticket=ticket))
    state = held.host.state()
    assert (state.target, state.demo) == (None, None)  # nothing loaded, nothing remembered
    assert held.reports == []  # the step after the cancel is not reported


def test_a_cancelled_load_reads_as_cancelled_whatever_failed() -> None:
    ticket = LoadTicket()

    def check(path: str) -> None:
        if path == OTHER_TARGET.path:
            ticket.cancel()  # the user cancels while the file check fails for its own reason
            raise ModelLoadError(path, "unreadable")

    held = Host(check_file=check)
    held.host.load(LoadRequest(TARGET, DRAFT))
    with pytest.raises(Cancelled) as caught:
        held.host.load(LoadRequest(OTHER_TARGET, DRAFT, ticket=ticket))
    assert isinstance(caught.value.__cause__, ModelLoadError)
    assert (held.host.state().target, held.host.state().draft) == (TARGET, DRAFT)


def test_cancelling_a_model_load_stops_it_and_restores(held: Host) -> None:
    held.host.load(LoadRequest(TARGET, None))
    ticket = LoadTicket()
    ticket.cancel()
    with pytest.raises(Cancelled):
        held.host.load(LoadRequest(OTHER_TARGET, None, ticket=ticket))
    assert held.host.state().target == TARGET


def test_models_lost_outside_a_load_are_reported_once(held: Host) -> None:
    held.host.load(LoadRequest(TARGET, DRAFT))
    assert held.host.check_lost() is None  # still held
    held.local.unload()  # as a dead RPC worker takes the child's models
    lost = held.host.check_lost()
    assert lost is not None and (lost.target, lost.draft) == (None, NO_DRAFT)
    assert held.host.check_lost() is None


def test_close_frees_both_sessions(held: Host) -> None:
    held.host.load(LoadRequest(ModelConfig("target.gguf", rpc_servers=(WORKER,)), None))
    held.host.close()
    assert held.remotes[0].closed and held.local.target_facts is None
    assert held.host.state().target is None
