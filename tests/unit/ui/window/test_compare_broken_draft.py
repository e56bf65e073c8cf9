"""Compare on the window's own models with a draft file that cannot be loaded among the
drafts: that draft's row says why, the others are still measured, and the chat keeps its
draft."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from tests.helpers.fake_window import TIMEOUT_MS, compare_with_another_draft
from tests.helpers.qt_window import send
from ui.window.main_window import MainWindow


def test_a_broken_draft_is_its_rows_error_and_the_other_drafts_are_still_measured(
    window: MainWindow, qtbot: QtBot, files: dict[str, Path]
) -> None:
    # The stand-in model refuses files named "broken"; the catalog lists it as a fitting draft.
    _broken, dialog = compare_with_another_draft(qtbot, window, files, "broken-draft.gguf")
    with qtbot.waitSignal(dialog.reportReady, timeout=TIMEOUT_MS) as ready:
        dialog.start()
    report = ready.args[0]
    qtbot.waitUntil(lambda: not dialog.running, timeout=TIMEOUT_MS)

    by_name = {c.label.split(" ")[0]: c for c in report.configs}
    assert set(by_name) == {"broken-draft.gguf", "small-draft.gguf", "second-target.gguf"}
    failed = by_name["broken-draft.gguf"]
    assert not failed.measured and failed.error is not None and "broken" in failed.error
    assert by_name["small-draft.gguf"].measured and by_name["second-target.gguf"].measured

    row = report.configs.index(failed) + 1  # the plain row comes first
    cell = dialog.table.item(row, 1)
    assert cell is not None and cell.text().startswith("Cannot load model")
    assert "broken-draft.gguf" in dialog.status.text()  # the verdict names it too
    dialog.close()

    # The runtime's models are as they were: the chat still drafts with its own draft.
    stats = send(qtbot, window, "After compare")
    assert stats.get("mode") == "hybrid" and stats.get("draft") == "small-draft.gguf"


def test_use_this_draft_says_when_the_window_has_loaded_it(
    window: MainWindow, qtbot: QtBot, files: dict[str, Path]
) -> None:
    # The dialog said "Loading … as the chat's draft." long after the load had ended.
    other, dialog = compare_with_another_draft(qtbot, window, files, "other-draft.gguf")
    with qtbot.waitSignal(dialog.reportReady, timeout=TIMEOUT_MS):
        dialog.start()
    qtbot.waitUntil(lambda: not dialog.running, timeout=TIMEOUT_MS)
    report = dialog.report
    assert report is not None
    row = next(i for i, c in enumerate(report.configs, 1) if c.draft_path == str(other))
    dialog.table.selectRow(row)
    dialog.use_selected_draft()
    qtbot.waitUntil(lambda: window.models.draft_value == str(other), timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: "chat's draft now" in dialog.status.text(), timeout=TIMEOUT_MS)
    assert dialog.status.text() == "other-draft.gguf is the chat's draft now."
    dialog.close()
