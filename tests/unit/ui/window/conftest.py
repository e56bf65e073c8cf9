"""Windows on stand-in models (tests.helpers.fake_model): the real worker thread, Runtime,
engine and signals, so these tests take seconds (tests/integration/ui has the real models)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QSettings
from pytestqt.qtbot import QtBot

from app.engine.model_host import RemoteRuntimeFactory
from app.engine.runtime import Runtime
from app.store import ConversationStore
from models.compat import check_draft_file
from tests.helpers.fake_model import CHATML, FakeModel
from tests.helpers.model_files import default_tokens, write_tiny_gguf
from tests.helpers.qt_window import close_window, send, write_preferences
from ui.main import create_window, ensure_application
from ui.settings import Settings
from ui.window.main_window import MainWindow, UiState

TIMEOUT_MS = 20_000


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """Tiny real GGUF headers (the catalog and the vocabulary check read them); the stand-in
    model decides what loading them does. Names with "draft" make a draft that disagrees at
    every fourth position; "broken" fails to load."""
    folder = tmp_path / "gguf"
    # The headers carry the chat template the stand-in model uses, as a real file would.
    write = functools.partial(write_tiny_gguf, chat_template=CHATML)
    return {
        "target": write(folder / "target.gguf", tensor_elements=4096),
        "target2": write(folder / "second-target.gguf", tensor_elements=2048),
        "draft": write(folder / "small-draft.gguf", tensor_elements=64),
        "broken": write(folder / "broken-target.gguf", tensor_elements=8192),
        "other": write(
            folder / "other-vocab.gguf",
            tokens=[*default_tokens(3), *[f"other{i}" for i in range(3, 64)]],
            tensor_elements=32,
        ),
    }


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


@pytest.fixture
def window(qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]) -> Iterator[MainWindow]:
    window = open_fake_window(isolated_data_dir, files)
    with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
        window.start()
    assert window.state == UiState.Idle, window.banner.text
    yield window
    close_window(window)


def open_with_one_reply(
    qtbot: QtBot, data_dir: Path, files: dict[str, Path], *, model_step_s: float, max_tokens: int
) -> tuple[MainWindow, int]:
    """A started window whose chat holds "Hello" and a reply of `max_tokens`; the chat's id.
    The caller closes the window."""
    window = open_fake_window(data_dir, files, model_step_s=model_step_s)
    with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
        window.start()
    window.settings.set("generation/max_tokens", max_tokens)
    send(qtbot, window, "Hello")
    assert window.conversation_id is not None
    return window, window.conversation_id
