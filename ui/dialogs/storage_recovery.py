"""Opening the conversation database at start, with a way out when it is damaged.

A damaged database (corrupt, truncated, a folder in its place) must not keep the app from
starting: the user is offered a fresh history, with the damaged file moved aside (renamed with a
timestamp, never deleted) so nothing is lost for good. Other failures (an unwritable folder, a
lock held by another program) cannot be fixed from here: they are shown in one sentence.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QMessageBox, QWidget

from app.engine.corpus_files import FOLDER_NAME as HISTORY_INDEX_FOLDER
from app.store import ConversationStore
from app.store_errors import StoreDamagedError, StoreError
from ui.messages import describe

TITLE = "SpecChat"
FRESH = "Start with a fresh history"

Ask = Callable[[str], bool]
"""Shows a question; True means start fresh and keep the damaged file aside."""
Tell = Callable[[str], None]
"""Shows a sentence the user only acknowledges."""


def open_store(
    path: Path, *, ask: Ask | None = None, tell: Tell | None = None
) -> ConversationStore | None:
    """The store at `path`, a fresh one if the user chose so, or None (the app should quit)."""
    ask = ask or _ask_box
    tell = tell or _tell_box
    try:
        store = ConversationStore(path)
    except StoreDamagedError as exc:
        question = (
            f"{describe(exc)}\n\n{FRESH}? The damaged file is kept beside it, renamed, "
            "so nothing is deleted."
        )
        if not ask(question):
            return None
    except (StoreError, OSError) as exc:
        tell(describe(exc))
        return None
    else:
        if store.created:  # the database was deleted (or this is the first start)
            _forget_past_chats(path)
        return store
    try:
        store, aside = ConversationStore.recover(path)
    except (StoreError, OSError) as exc:
        tell(describe(exc))
        return None
    _forget_past_chats(path)
    tell(f"Started a fresh history. The damaged database was kept as {aside}.")
    return store


def _ask_box(text: str, parent: QWidget | None = None) -> bool:
    box = QMessageBox(QMessageBox.Icon.Warning, TITLE, text, parent=parent)
    fresh = box.addButton(FRESH, QMessageBox.ButtonRole.AcceptRole)
    box.addButton("Quit", QMessageBox.ButtonRole.RejectRole)
    box.setDefaultButton(fresh)
    box.exec()
    return box.clickedButton() is fresh


def _tell_box(text: str, parent: QWidget | None = None) -> None:
    QMessageBox.information(parent, TITLE, text)


def _forget_past_chats(database: Path) -> None:
    """The past-chats draft index was built from an older history: a fresh history starts it
    afresh too (it is rebuilt from the new one as the chats come), so chats wiped with their
    database never draft again."""
    shutil.rmtree(database.parent / HISTORY_INDEX_FOLDER, ignore_errors=True)
