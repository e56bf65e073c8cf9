"""Windows on stand-in models (tests.helpers.fake_model): the real worker thread, Runtime,
engine and signals, so the tests that use them take seconds (tests/integration/ui has the real
models). The files they load come from the `files` fixture of tests/unit/ui/window."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSettings
from pytestqt.qtbot import QtBot

from app.engine.model_host import RemoteRuntimeFactory
from app.engine.runtime import Runtime
from app.store import ConversationStore
from models.compat import check_draft_file
from tests.helpers.fake_model import FakeModel
from tests.helpers.model_files import write_tiny_gguf
from tests.helpers.qt_window import close_window, send, write_preferences
from ui.dialogs.compare_dialog import CompareDialog
from ui.main import create_window, ensure_application
from ui.settings import Settings
from ui.window.main_window import MainWindow, UiState

TIMEOUT_MS = 20_000


def open_fake_window(
    data_dir: Path,
    files: dict[str, Path],
    *,
    remote_runtime: RemoteRuntimeFactory | None = None,
    model_step_s: float = 0.002,
    **preferences: Any,
) -> MainWindow:
    values: dict[str, Any] = {
        "models/target": str(files["target"]),
        "models/draft": str(files["draft"]),
        "models/extra_files": [str(files[k]) for k in ("target", "target2", "draft")],
        "models/n_threads": 1,
        "generation/max_tokens": 24,
    }
    values.update(preferences)
    write_preferences(data_dir, values)
    ensure_application()
    settings = Settings(QSettings(str(data_dir / "settings.ini"), QSettings.Format.IniFormat))
    runtime = Runtime(vet_draft=check_draft_file, open_model=FakeModel.factory(step_s=model_step_s))
    window = create_window(
        ConversationStore(data_dir / "conversations.sqlite3"),
        settings,
        models_folder=data_dir / "models",
        runtime=runtime,
        # The stand-in files are headers only: llama.cpp itself never loads them here.
        check_file=lambda _path: None,
        remote_runtime=remote_runtime,
    )
    window.show()
    return window


@contextmanager
def fake_window_with_one_reply(
    qtbot: QtBot, data_dir: Path, files: dict[str, Path], *, model_step_s: float, max_tokens: int
) -> Iterator[tuple[MainWindow, int]]:
    """A started window whose chat holds "Hello" and a reply of `max_tokens`, and the chat's
    id. The window is closed on the way out, unless the test already closed it itself."""
    window = open_fake_window(data_dir, files, model_step_s=model_step_s)
    try:
        with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
            window.start()
        window.settings.set("generation/max_tokens", max_tokens)
        send(qtbot, window, "Hello")
        assert window.conversation_id is not None
        yield window, window.conversation_id
    finally:
        if not window.is_shut_down():
            close_window(window)


def compare_with_another_draft(
    qtbot: QtBot, window: MainWindow, files: dict[str, Path], name: str
) -> tuple[Path, CompareDialog]:
    """Add a tiny draft file `name` beside the chat's draft, which stays the chat's draft, send
    "Hello" (Compare runs on the chat's last prompt) and open Compare: the file and the dialog."""
    added = write_tiny_gguf(files["draft"].parent / name, tensor_elements=32)
    window.models.add_files([str(added)])
    qtbot.waitUntil(
        lambda: str(added) in window.settings.get_list("models/extra_files"), timeout=TIMEOUT_MS
    )
    qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
    if window.models.draft_value != str(files["draft"]):  # adding it may have made it the draft
        window.models.choose_draft(str(files["draft"]))
    qtbot.waitUntil(
        lambda: window.state == UiState.Idle and window.models.draft_value == str(files["draft"]),
        timeout=TIMEOUT_MS,
    )
    send(qtbot, window, "Hello")
    dialog = window.open_compare_dialog()
    assert dialog is not None
    return added, dialog


@contextmanager
def another_store(data_dir: Path) -> Iterator[ConversationStore]:
    """The chats as another window, or the next start, opens them."""
    store = ConversationStore(data_dir / "conversations.sqlite3")
    try:
        yield store
    finally:
        store.close()
