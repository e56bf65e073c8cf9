"""Remote workers in the window, on stand-in models: the Settings fields, the reload they cause,
the engine the worker thread switches to, and a worker lost mid-reply.

The "remote" engine here is a Runtime over stand-in models that records the configs it loads
and can lose its worker after some tokens, as an IsolatedRuntime does when a worker dies
(tests/integration/ui/test_remote_window.py does the same with a real worker)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QSettings, Qt
from pytestqt.qtbot import QtBot

from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.events import Event, TokenEvent
from app.engine.model_host import DraftSetting, LoadedState
from app.engine.runtime import Runtime
from app.errors import RpcWorkerLostError
from app.llama import rpc
from app.llama.config import ModelConfig
from app.llama.facts import MemoryUsage
from app.llama.model import LoadProgress
from app.llama.rpc_token import FINGERPRINT_BYTES, SECRET_BYTES, WorkerToken
from models.compat import check_draft_file
from tests.helpers.fake_model import FakeModel
from tests.helpers.fake_window import TIMEOUT_MS, open_fake_window
from tests.helpers.qt_window import close_window, send
from tests.helpers.rpc_workers import free_port
from tests.unit.ui.window.test_local_server_switch import in_thread, post
from ui.settings import Settings
from ui.widgets.metrics_panel import MetricsPanel
from ui.widgets.remote_workers import RemoteWorkersBox
from ui.window import worker_return
from ui.window.compare import NOT_ON_WORKERS
from ui.window.main_window import MainWindow, UiState

WORKER = "127.0.0.1:50052"
LOST = f"an RPC worker ({WORKER}) stopped answering; the reply so far is kept"


class StandInRemote(Runtime):
    """Plays the engine for models on workers: records each config it opens, and with
    `die_after` set loses its models after that many tokens of a reply, as a dead worker does."""

    def __init__(self, opened: list[ModelConfig], *, step_s: float) -> None:
        fake_open = FakeModel.factory(step_s=step_s)

        def open_model(config: ModelConfig, *, progress: LoadProgress | None = None) -> FakeModel:
            opened.append(config)
            return fake_open(config, progress=progress)

        super().__init__(vet_draft=check_draft_file, open_model=open_model)
        self.die_after: int | None = None
        self.replies = 0

    def generate(
        self,
        prompt_ids: Sequence[int],
        config: GenerationConfig,
        control: GenerationControl | None = None,
    ) -> Iterator[Event]:
        self.replies += 1
        tokens = 0
        events = super().generate(prompt_ids, config, control)
        with contextlib.closing(events):
            for event in events:
                yield event
                tokens += isinstance(event, TokenEvent)
                if self.die_after is not None and tokens >= self.die_after:
                    break
            else:
                return
        self.unload()
        raise RpcWorkerLostError(LOST)


class Remotes:
    def __init__(self, step_s: float = 0.002) -> None:
        self.opened: list[ModelConfig] = []
        self.made: list[StandInRemote] = []
        self.step_s = step_s

    def __call__(self) -> StandInRemote:
        runtime = StandInRemote(self.opened, step_s=self.step_s)
        self.made.append(runtime)
        return runtime


@pytest.fixture
def remotes() -> Remotes:
    return Remotes(step_s=0.03)  # slow enough that a reply is still running after 3 tokens


@pytest.fixture
def remote_window(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path], remotes: Remotes
) -> Iterator[MainWindow]:
    window = open_fake_window(isolated_data_dir, files, remote_runtime=remotes)
    with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
        window.start()
    assert window.state == UiState.Idle, window.banner.text
    yield window
    close_window(window)


def _settings(folder: Path) -> Settings:
    return Settings(QSettings(str(folder / "settings.ini"), QSettings.Format.IniFormat))


def _enter(qtbot: QtBot, box: RemoteWorkersBox, text: str, *, draft: bool = False) -> None:
    field = box.draft if draft else box.target
    field.setText(text)
    field.editingFinished.emit()


def test_the_fields_warn_where_workers_are_entered_and_advise_a_local_draft(
    qtbot: QtBot, tmp_path: Path
) -> None:
    settings = _settings(tmp_path)
    box = RemoteWorkersBox(settings, available=True)
    qtbot.addWidget(box)
    assert "encrypted" in box.notice.text() and rpc.SECURITY_WARNING not in box.notice.text()
    assert "best kept local" in box.draft.toolTip()
    assert box.target.isEnabled() and box.draft.isEnabled()
    _enter(qtbot, box, " 10.0.0.2:50052 , plain@10.0.0.3:50053 ")
    assert settings.get_str("models/target_rpc") == "10.0.0.2:50052,plain@10.0.0.3:50053"
    # Only a worker reached without key or encryption is warned of, by its address.
    assert rpc.SECURITY_WARNING in box.notice.text() and "10.0.0.3:50053" in box.notice.text()
    assert "10.0.0.2" not in box.notice.text()
    _enter(qtbot, box, "10.0.0.4", draft=True)
    assert "is not HOST:PORT" in box.problem.text() and not box.problem.isHidden()
    assert settings.get_str("models/draft_rpc") == ""  # a malformed list is never saved
    _enter(qtbot, box, "", draft=True)
    assert box.problem.isHidden()


def test_a_workers_key_is_kept_so_the_next_start_reaches_it(qtbot: QtBot, tmp_path: Path) -> None:
    key = str(WorkerToken(b"s" * SECRET_BYTES, b"f" * FINGERPRINT_BYTES))
    settings = _settings(tmp_path)
    box = RemoteWorkersBox(settings, available=True)
    qtbot.addWidget(box)
    _enter(qtbot, box, f"{key}@10.0.0.2:50052")
    assert settings.get_str("models/target_rpc") == f"{key}@10.0.0.2:50052"
    assert box.target.text() == f"{key}@10.0.0.2:50052"
    reopened = RemoteWorkersBox(_settings(tmp_path), available=True)
    qtbot.addWidget(reopened)
    assert reopened.target.text() == f"{key}@10.0.0.2:50052"
    assert rpc.SECURITY_WARNING not in reopened.notice.text()


def test_without_rpc_in_the_build_the_fields_are_off_with_the_rebuild_command(
    qtbot: QtBot, tmp_path: Path
) -> None:
    box = RemoteWorkersBox(_settings(tmp_path))  # undecided until the engine loaded llama.cpp
    qtbot.addWidget(box)
    assert box.available is None and box.target.isEnabled()
    box.set_available(False)
    assert not box.target.isEnabled() and not box.draft.isEnabled()
    assert rpc.REBUILD_COMMAND in box.notice.text()
    assert "\n" not in box.notice.text()


def test_the_memory_panel_lists_each_workers_memory_and_the_state_sums_the_targets(
    qtbot: QtBot,
) -> None:
    panel = MetricsPanel()
    qtbot.addWidget(panel)
    gib = 1024**3
    workers = (
        rpc.WorkerMemory("10.0.0.2:50052", "RPC0", 3 * gib, 8 * gib),
        rpc.WorkerMemory("10.0.0.3:50052", "RPC1", 1 * gib, 4 * gib),
    )
    panel.show_memory(None, 0, MemoryUsage(0, 0, 0, 0, 0, 0), "none", workers)
    text = panel.workers_memory.text()
    assert "10.0.0.2:50052" in text and "3.0 GiB free / 8.0 GiB" in text
    assert "10.0.0.3:50052" in text and not panel.workers_memory.isHidden()
    panel.show_memory(None, 0, MemoryUsage(0, 0, 0, 0, 0, 0), "none")
    assert panel.workers_memory.isHidden()
    state = LoadedState(
        ModelConfig("t.gguf", rpc_servers=("10.0.0.2:50052",)),
        DraftSetting("none"),
        MemoryUsage(0, 0, 0, 0, 0, 0),
        None,
        workers,
    )
    assert state.remote and state.remote_free_bytes == 3 * gib


def test_workers_set_mid_reply_reload_after_it_onto_the_remote_engine_and_back(
    remote_window: MainWindow, remotes: Remotes, qtbot: QtBot
) -> None:
    window = remote_window
    # Asked once the models loaded, when llama.cpp's library is already in the process.
    assert window.settings_panel.remote_workers.available == rpc.supports_rpc()
    local_reply = send(qtbot, window, "Hello")["summary"]
    assert local_reply and not remotes.made
    window.prompt.setPlainText("Hello again")
    qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
    assert window.state == UiState.Generating
    with qtbot.waitSignal(window.modelsLoaded, timeout=TIMEOUT_MS) as loaded:
        _enter(qtbot, window.settings_panel.remote_workers, WORKER)
        assert window.state == UiState.Generating  # the reply runs on; the reload waits
    state: Any = loaded.args[0]
    assert state.target.rpc_servers == (WORKER,) and state.remote
    assert len(remotes.made) == 1
    # The target went to the workers; the draft stayed local, as its field is empty.
    assert [c.rpc_servers for c in remotes.opened] == [(WORKER,), ()]
    send(qtbot, window, "Now on the worker")
    assert window.view.messages[-1].text
    # Compare needs the in-process engine: one sentence instead of a dialog.
    with qtbot.waitSignal(window.errorShown) as shown:
        assert window.open_compare_dialog() is None
    assert shown.args[0] == NOT_ON_WORKERS
    # Clearing the field brings the models back to this machine.
    with qtbot.waitSignal(window.modelsLoaded, timeout=TIMEOUT_MS) as loaded:
        _enter(qtbot, window.settings_panel.remote_workers, "")
    assert loaded.args[0].target.rpc_servers == () and not loaded.args[0].remote
    assert remotes.made[0].target is None  # the remote engine's models were freed
    send(qtbot, window, "Back home")


def test_a_worker_lost_mid_reply_keeps_the_partial_reply_and_the_window_recovers(
    remote_window: MainWindow, remotes: Remotes, qtbot: QtBot
) -> None:
    window = remote_window
    with qtbot.waitSignal(window.modelsLoaded, timeout=TIMEOUT_MS):
        _enter(qtbot, window.settings_panel.remote_workers, WORKER)
    remotes.made[0].die_after = 3
    errors: list[str] = []
    window.errorShown.connect(errors.append)
    window.prompt.setPlainText("Tell me a story")
    with qtbot.waitSignal(window.replyFailed, timeout=TIMEOUT_MS):
        qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.state == UiState.NoModel, timeout=TIMEOUT_MS)
    reply = window.view.messages[-1]
    assert reply.role == "assistant" and reply.text.strip()  # the tokens that arrived
    assert "stopped answering; the reply so far is kept" in reply.note
    assert errors == [reply.note]  # one message, the same sentence
    assert window.models.loaded is not None and window.models.loaded.target is None
    assert window.conversation_id is not None
    stored = window.store.messages(window.conversation_id)[-1]
    assert (stored.role, stored.content) == ("assistant", reply.text)  # kept in the chat too
    # Back to this machine: clearing the field loads the same models again, locally.
    with qtbot.waitSignal(window.modelsLoaded, timeout=TIMEOUT_MS) as loaded:
        _enter(qtbot, window.settings_panel.remote_workers, "")
    assert loaded.args[0].target is not None and not loaded.args[0].remote
    qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
    send(qtbot, window, "Are you there?")


def test_an_unreachable_worker_is_one_message_and_the_local_models_come_back(
    isolated_data_dir: Path, files: dict[str, Path], qtbot: QtBot
) -> None:
    # The production engine for workers (an IsolatedRuntime): the connection is refused before
    # any model loads, so the stand-in files never reach llama.cpp.
    window = open_fake_window(isolated_data_dir, files)
    try:
        with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
            window.start()
        endpoint = f"127.0.0.1:{free_port()}"
        errors: list[str] = []
        window.errorShown.connect(errors.append)
        with qtbot.waitSignal(window.modelsLoaded, timeout=TIMEOUT_MS) as loaded:
            _enter(qtbot, window.settings_panel.remote_workers, f"plain@{endpoint}")
        assert len(errors) == 1 and endpoint in errors[0] and "connection refused" in errors[0]
        state = loaded.args[0]
        assert state.target is not None and state.target.path == str(files["target"])
        assert not state.remote
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        send(qtbot, window, "Still here?")
    finally:
        close_window(window)


def test_the_local_server_answers_from_the_models_on_workers_once_they_moved_there(
    remote_window: MainWindow, remotes: Remotes, qtbot: QtBot
) -> None:
    window = remote_window
    window.server_panel.port.setValue(free_port())
    window.server_panel.switch.setChecked(True)
    url = window.server_switch.server.url
    with qtbot.waitSignal(window.modelsLoaded, timeout=TIMEOUT_MS):
        _enter(qtbot, window.settings_panel.remote_workers, WORKER)
    body = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 6}
    status, answer = in_thread(qtbot, lambda: post(f"{url}/chat/completions", body))
    assert status == 200, answer
    assert answer["choices"][0]["message"]["content"]
    assert remotes.made[0].replies == 1  # served by the engine that holds the models now
    window.server_panel.switch.setChecked(False)


def test_models_lost_with_a_worker_load_again_by_themselves_once_it_answers(
    isolated_data_dir: Path,
    files: dict[str, Path],
    remotes: Remotes,
    qtbot: QtBot,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(worker_return, "RELOAD_RETRY_S", 0.2)
    endpoint = f"127.0.0.1:{free_port()}"
    window = open_fake_window(isolated_data_dir, files, remote_runtime=remotes)
    try:
        with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
            window.start()
        with qtbot.waitSignal(window.modelsLoaded, timeout=TIMEOUT_MS):
            _enter(qtbot, window.settings_panel.remote_workers, f"plain@{endpoint}")
        remotes.made[0].die_after = 3
        messages: list[str] = []
        window.models.statusMessage.connect(messages.append)
        window.prompt.setPlainText("Tell me a story")
        with qtbot.waitSignal(window.replyFailed, timeout=TIMEOUT_MS):
            qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: window.state == UiState.NoModel, timeout=TIMEOUT_MS)
        assert messages == [worker_return.WAITING_FOR_WORKERS]
        remotes.made[0].die_after = None
        loads = len(remotes.opened)
        qtbot.wait(1000)  # several tries while nothing listens: no load, no message
        assert len(remotes.opened) == loads and window.models.target_path is None
        assert messages == [worker_return.WAITING_FOR_WORKERS]

        port = int(endpoint.rsplit(":", 1)[1])
        # The worker is back: the next try finds it.
        with (
            socket.create_server(("127.0.0.1", port)),
            qtbot.waitSignal(window.modelsLoaded, timeout=TIMEOUT_MS) as loaded,
        ):
            pass
        assert loaded.args[0].target is not None and loaded.args[0].remote
        assert loaded.args[0].target.rpc_servers == (endpoint,)
        assert messages[-1] == worker_return.WORKERS_BACK
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        send(qtbot, window, "Are you there?")
    finally:
        close_window(window)
