"""Keyboard reach on stand-in models: Tab moves on out of every table and text box of the
Models and Compare dialogs, so the buttons after them can be reached without a mouse."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractButton, QApplication, QTableWidgetItem, QWidget
from pytestqt.qtbot import QtBot

from tests.helpers.fake_window import TIMEOUT_MS
from tests.helpers.qt_window import send
from ui.dialogs.models_dialog import ModelsDialog
from ui.window.main_window import MainWindow

# More presses than a table's cells: a trapped Tab would walk them all and wrap round.
_PRESSES = 60


def _tab_from(widget: QWidget, presses: int = _PRESSES) -> list[QWidget]:
    """The widgets focus visits as Tab is pressed, starting on `widget`."""
    widget.setFocus(Qt.FocusReason.TabFocusReason)
    QApplication.processEvents()
    visited: list[QWidget] = []
    for _ in range(presses):
        focus = QApplication.focusWidget()
        assert focus is not None
        QTest.keyClick(focus, Qt.Key.Key_Tab)
        QApplication.processEvents()
        after = QApplication.focusWidget()
        assert after is not None
        visited.append(after)
    return visited


def _names(widgets: list[QWidget]) -> set[str]:
    return {w.objectName() for w in widgets}


def _button_texts(widgets: list[QWidget]) -> set[str]:
    return {w.text() for w in widgets if isinstance(w, QAbstractButton)}


def _open_models(window: MainWindow, qtbot: QtBot) -> ModelsDialog:
    dialog = window.open_models_dialog()
    qtbot.waitUntil(lambda: not dialog.busy, timeout=TIMEOUT_MS)
    dialog.activateWindow()
    return dialog


def test_tab_leaves_the_models_dialogs_tables_and_reaches_its_buttons(
    window: MainWindow, qtbot: QtBot
) -> None:
    dialog = _open_models(window, qtbot)
    local = dialog.local
    for table in (local.models_table, local.details.drafts_table):
        assert table.rowCount() > 0, table.objectName()
        visited = _tab_from(table)
        assert _names(visited) - {table.objectName()}, f"Tab stays in {table.objectName()}"
        assert {"Make draft", "Close"} <= _button_texts(visited), table.objectName()
    dialog.close()


def test_tab_leaves_the_download_catalog_and_reaches_its_buttons(
    window: MainWindow, qtbot: QtBot
) -> None:
    dialog = _open_models(window, qtbot)
    dialog.tabs.setCurrentWidget(dialog.downloads)
    table = dialog.downloads.catalog_table
    assert table.rowCount() > 0
    table.selectRow(0)  # the Download buttons are enabled only with a pair selected
    visited = _tab_from(table)
    assert _names(visited) - {"catalogTable"}, "Tab stays in the catalog"
    assert {"Download target", "Download both", "Close"} <= _button_texts(visited)
    dialog.close()


def test_tab_leaves_the_compare_prompt_and_table_and_reaches_compare(
    window: MainWindow, qtbot: QtBot
) -> None:
    send(qtbot, window, "Hello")
    dialog = window.open_compare_dialog()
    assert dialog is not None
    dialog.activateWindow()
    typed = dialog.prompt.toPlainText()
    visited = _tab_from(dialog.prompt, presses=1)
    assert dialog.prompt.toPlainText() == typed, "Tab was typed into the prompt"
    assert visited == [dialog.run_button]

    # A filled table: with a row to walk, a trapped Tab would never reach Compare again.
    dialog.table.setRowCount(2)
    for row in range(2):
        for column in range(dialog.table.columnCount()):
            dialog.table.setItem(row, column, QTableWidgetItem("x"))
    dialog.table.selectRow(0)
    visited = _tab_from(dialog.table)
    assert _names(visited) - {"compareTable"}, "Tab stays in the table"
    assert dialog.run_button in visited
    dialog.close()
