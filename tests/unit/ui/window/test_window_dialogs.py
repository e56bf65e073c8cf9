"""The window's side of the Models and Compare dialogs on stand-in models: the dialogs learn
which files are loaded, and a draft chosen in Compare becomes the chat's draft."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from tests.helpers.fake_window import TIMEOUT_MS, compare_with_another_draft
from ui.dialogs.models_dialog import ModelsDialog
from ui.window.main_window import MainWindow


def _marks(dialog: ModelsDialog) -> dict[str, str]:
    """The "In use" column by file name."""
    table = dialog.local.models_table
    marks = {}
    for row in range(table.rowCount()):
        name, mark = table.item(row, 0), table.item(row, 1)
        assert name is not None and mark is not None
        marks[name.text()] = mark.text()
    return marks


def test_the_models_dialog_marks_and_selects_the_loaded_models(
    window: MainWindow, qtbot: QtBot, files: dict[str, Path], tmp_path: Path
) -> None:
    dialog = window.open_models_dialog()
    qtbot.waitUntil(lambda: dialog.local.selected_path() == files["target"], timeout=TIMEOUT_MS)
    marks = _marks(dialog)
    assert marks["target.gguf"] == "target" and marks["small-draft.gguf"] == "draft"
    assert marks["second-target.gguf"] == ""
    qtbot.waitUntil(lambda: not dialog.busy, timeout=TIMEOUT_MS)

    # Open while the window loads another target: the marks follow.
    window.models.choose_target(str(files["target2"]))
    qtbot.waitUntil(
        lambda: _marks(dialog).get("second-target.gguf") == "target", timeout=TIMEOUT_MS
    )
    assert _marks(dialog)["target.gguf"] == ""
    qtbot.waitUntil(lambda: not dialog.busy, timeout=TIMEOUT_MS)


def test_use_this_draft_in_compare_loads_it_as_the_chats_draft(
    window: MainWindow, qtbot: QtBot, files: dict[str, Path]
) -> None:
    other, dialog = compare_with_another_draft(qtbot, window, files, "tiny-draft.gguf")
    dialog.draftChosen.emit(str(other))  # what the row's "Use this draft" sends
    qtbot.waitUntil(lambda: window.models.draft_value == str(other), timeout=TIMEOUT_MS)
    dialog.close()
