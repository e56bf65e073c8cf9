"""What the menus do that the window's other parts do not: copying, editing the last message,
the theme, and the help dialogs."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from ui.themes import apply_theme
from ui.window.layout import WindowLayout


def app_version() -> str:
    try:
        return version("specchat")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


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
