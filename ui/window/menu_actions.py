"""The menus' wiring, and what they do that the window's other parts do not: the theme and the
help dialogs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from app.version import app_version
from ui.themes import apply_theme
from ui.window.layout import WindowLayout

if TYPE_CHECKING:
    from ui.window.main_window import MainWindow


def shortcuts_html(rows: list[tuple[str, str]]) -> str:
    lines = "".join(f"<tr><td><b>{keys}</b></td><td>{what}</td></tr>" for keys, what in rows)
    extra = (
        "<tr><td><b>Enter</b></td><td>Send the message</td></tr>"
        "<tr><td><b>Shift+Enter</b></td><td>New line in the message</td></tr>"
    )
    return f"<table cellspacing='6'>{extra}{lines}</table>"


def show_shortcuts(window: WindowLayout) -> QMessageBox:
    box = QMessageBox(window)
    box.setObjectName("shortcutsDialog")
    box.setWindowTitle("Keyboard shortcuts")
    box.setText(shortcuts_html(window.shortcut_table()))
    box.show()
    return box


def show_about(parent: QWidget) -> QMessageBox:
    box = QMessageBox(parent)
    box.setWindowTitle("About SpecChat")
    box.setText(
        f"<h3>SpecChat {app_version()}</h3>"
        "<p>An offline chat for local GGUF models, sped up by speculative decoding on "
        "llama.cpp: a small draft model guesses ahead, the target checks its guesses in one "
        "pass, and exact acceptance rules keep every reply distributed as the target alone "
        "would write it.</p>"
    )
    box.show()
    return box


def choose_theme(window: WindowLayout, action: QAction) -> None:
    key = str(action.data())
    window.settings.set("view/theme", key)
    app = QApplication.instance()
    if isinstance(app, QApplication):
        apply_theme(app, key)


def connect_menus(window: MainWindow) -> None:
    """Every menu action to what it does (the layout made the actions and their shortcuts)."""
    w = window
    for action, slot in (
        (w.new_chat_action, w.new_chat),
        (w.add_models_action, w.add_models_dialog),
        (w.export_action, w.export_current),
        (w.quit_action, w.close),
        (w.stop_action, w.stop),
        (w.regenerate_action, w.regenerate),
        (w.copy_reply_action, w.copy_last_reply),
        (w.edit_last_action, w.edit_last_message),
        (w.focus_prompt_action, w.prompt.setFocus),
        (w.metrics_tab_action, lambda: w.side_tabs.setCurrentIndex(0)),
        (w.insight_tab_action, lambda: w.side_tabs.setCurrentIndex(1)),
        (w.models_action, w.open_models_dialog),
        (w.compare_action, w.open_compare_dialog),
        (w.speculation_action, w.controls.speculation.toggle),
        (w.shortcuts_action, lambda: show_shortcuts(w)),
        (w.about_action, lambda: show_about(w)),
    ):
        action.triggered.connect(slot)
    w.highlight_action.toggled.connect(lambda on: w.settings.set("view/highlight_draft", on))
    w.theme_actions.triggered.connect(lambda action: choose_theme(w, action))
