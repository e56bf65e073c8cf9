"""Adding files with Add GGUF…: every broken file of a batch says why, and the dialog opens
where the last files came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QFileDialog
from pytestqt.qtbot import QtBot

from app.cli.main import main as cli_main
from tests.helpers.fake_window import TIMEOUT_MS, open_fake_window
from tests.helpers.model_files import (
    default_tokens,
    hf_cache_layout,
    write_broken_files,
    write_tiny_gguf,
)
from tests.helpers.qt_window import close_window
from ui.window.main_window import MainWindow, UiState


class FileDialogStub:
    """Stands in for the system file dialog: records the folder it opened at and returns the
    files a user would pick there."""

    def __init__(self) -> None:
        self.opened_at: list[str] = []
        self.picks: list[str] = []

    def __call__(
        self, _parent: Any, _title: str, folder: str, _filter: str
    ) -> tuple[list[str], str]:
        self.opened_at.append(folder)
        return list(self.picks), ""


@pytest.fixture
def file_dialog(monkeypatch: pytest.MonkeyPatch) -> FileDialogStub:
    stub = FileDialogStub()
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", stub)
    return stub


def test_three_broken_files_added_at_once_each_say_why(
    window: MainWindow, qtbot: QtBot, tmp_path: Path, file_dialog: FileDialogStub
) -> None:
    broken = write_broken_files(tmp_path / "downloads")
    chosen = [broken[name] for name in ("empty.gguf", "random.gguf", "future.gguf")]
    file_dialog.picks = [str(path) for path, _reason in chosen]
    shown: list[str] = []
    window.errorShown.connect(shown.append)
    window.add_models_dialog()
    qtbot.waitUntil(lambda: bool(shown), timeout=TIMEOUT_MS)
    qtbot.wait(300)  # a later message would replace this one
    assert len(shown) == 1
    for path, reason in chosen:
        assert path.name in window.banner.text and reason in window.banner.text


def test_the_file_dialog_opens_where_the_last_files_came_from(
    window: MainWindow, qtbot: QtBot, tmp_path: Path, file_dialog: FileDialogStub
) -> None:
    broken = write_broken_files(tmp_path / "my models")
    file_dialog.picks = [str(broken["empty.gguf"][0])]
    window.add_models_dialog()
    assert file_dialog.opened_at[0] == str(Path.home())
    file_dialog.picks = []
    window.add_models_dialog()
    assert file_dialog.opened_at[1] == str(tmp_path / "my models")


def test_a_target_without_a_chat_template_says_what_it_is_chatted_in(
    window: MainWindow, qtbot: QtBot, tmp_path: Path
) -> None:
    plain_vocab = write_tiny_gguf(tmp_path / "no-template.gguf", tensor_elements=8192)
    gemma_vocab = write_tiny_gguf(
        tmp_path / "gemma-like.gguf",
        tokens=[*default_tokens(62), "<start_of_turn>", "<end_of_turn>"],
        tensor_elements=8192,
    )
    assert window.banner.text == ""
    for path in (plain_vocab, gemma_vocab):
        window.models.add_files([str(path)])
        qtbot.waitUntil(
            lambda p=path: str(p) in window.settings.get_list("models/extra_files"),
            timeout=TIMEOUT_MS,
        )
    qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)

    with qtbot.waitSignal(window.errorShown, timeout=TIMEOUT_MS) as warned:
        window.choose_target(str(plain_vocab))
    assert "no chat template" in warned.args[0] and "ChatML" in warned.args[0]

    qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
    messages: list[str] = []
    window.models.statusMessage.connect(messages.append)
    window.choose_target(str(gemma_vocab))
    qtbot.waitUntil(lambda: any("gemma turn format" in m for m in messages), timeout=TIMEOUT_MS)


def test_the_models_dialog_lists_the_files_added_not_their_whole_folder(
    window: MainWindow, qtbot: QtBot, files: dict[str, Path]
) -> None:
    folder = files["target"].parent
    assert len(list(folder.glob("*.gguf"))) == 5  # three were added, two were not
    dialog = window.open_models_dialog()
    qtbot.waitUntil(lambda: not dialog.busy and bool(dialog.entries), timeout=TIMEOUT_MS)
    listed = {e.path.name for e in dialog.entries if e.path.parent == folder}
    assert listed == {files[k].name for k in ("target", "target2", "draft")}
    dialog.close()


def test_a_draft_the_library_calls_compatible_is_offered_in_the_draft_list(
    qtbot: QtBot,
    isolated_data_dir: Path,
    files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A draft downloaded with the Hub's own tools: the library finds it in the Hub cache.
    blob = write_tiny_gguf(tmp_path / "blob" / "hub-draft.gguf", tensor_elements=32)
    cache = tmp_path / "hf-cache"
    hf_cache_layout(cache, "someone/tiny-drafts", {"hub-draft.gguf": blob})
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    window = open_fake_window(isolated_data_dir, files)
    try:
        with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
            window.start()
        dialog = window.open_models_dialog()
        qtbot.waitUntil(lambda: not dialog.busy and bool(dialog.entries), timeout=TIMEOUT_MS)
        in_library = [e for e in dialog.entries if e.path.name == "hub-draft.gguf"]
        assert in_library and in_library[0].source == "hf-cache"
        offered = {
            Path(value).name
            for _label, value, enabled, _tip in window.controls.draft_entries()
            if enabled
        }
        assert "hub-draft.gguf" in offered
        dialog.close()
    finally:
        close_window(window)


def test_models_list_shows_the_files_the_window_shows(
    window: MainWindow, qtbot: QtBot, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    own = write_tiny_gguf(files["target"].parent.parent / "mine" / "own.gguf", tensor_elements=16)
    window.models.add_files([str(own)])
    qtbot.waitUntil(
        lambda: str(own) in window.settings.get_list("models/extra_files"), timeout=TIMEOUT_MS
    )
    capsys.readouterr()
    assert cli_main(["models", "list", "--json"]) == 0
    listed = {Path(e["path"]).name for e in json.loads(capsys.readouterr().out)}
    assert {files[k].name for k in ("target", "target2", "draft")} | {"own.gguf"} <= listed
    assert "broken-target.gguf" not in listed  # in the same folder, never added
