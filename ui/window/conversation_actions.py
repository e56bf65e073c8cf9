"""What the window does with the list of chats: open, rename, delete, export, and the title.

Every store operation goes through store_action, so a storage failure is shown in words and
never raised into Qt's event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from PySide6.QtWidgets import QFileDialog, QMainWindow, QMessageBox, QPlainTextEdit

from app.store import StoreError
from ui.messages import describe
from ui.widgets.conversation_list import ConversationList
from ui.widgets.conversation_view import ConversationView
from ui.window.chat_controller import ChatController

T = TypeVar("T")


class ConversationActions:
    def __init__(
        self,
        window: QMainWindow,
        *,
        chat: ChatController,
        view: ConversationView,
        conversations: ConversationList,
        show_error: Callable[[str], None],
    ) -> None:
        self._window = window
        self._chat = chat
        self._view = view
        self._list = conversations
        self._show_error = show_error

    def store_action(self, action: Callable[[], T]) -> T | None:
        """Run a store operation; a storage failure is shown in words, never raised."""
        try:
            return action()
        except (StoreError, OSError) as exc:
            self._show_error(describe(exc))
            return None

    def refresh_list(self) -> None:
        conversations = self.store_action(self._chat.conversations) or []
        self._list.set_conversations(conversations, self._chat.conversation_id)

    def show_title(self) -> None:
        chat = self._chat
        title = chat.title() if chat.conversation_id is not None else None
        self._window.setWindowTitle(f"SpecChat — {title}" if title else "SpecChat")

    def new_chat(self) -> None:
        self._chat.new_chat()
        self._view.set_messages([])
        self.refresh_list()  # also clears the selection: no conversation is current
        self.show_title()

    def open(self, conversation_id: int) -> bool:
        messages = self.store_action(lambda: self._chat.open(conversation_id))
        if messages is None:
            return False
        self._view.set_messages(messages)
        self.show_title()
        return True

    def reopen_current(self) -> None:
        """Show the current chat again as stored (after messages were taken out of it)."""
        if self._chat.conversation_id is not None:
            self.open(self._chat.conversation_id)

    def copy_last_reply(self) -> None:
        replies = [m for m in self._view.messages if m.role == "assistant" and m.text]
        if replies:
            self._view.copy_text(replies[-1].text)

    def take_back_last_message(self, box: QPlainTextEdit) -> bool:
        """Move the last message the user wrote (and what followed it) back into `box`."""
        text = self.store_action(self._chat.take_back_last_message)
        if text is None:
            return False
        self.reopen_current()
        box.setPlainText(text)
        box.setFocus()
        return True

    def rename(self, conversation_id: int, title: str) -> None:
        self.store_action(lambda: self._chat.rename(conversation_id, title))
        self.refresh_list()
        self.show_title()

    def delete(self, conversation_id: int) -> bool:
        """Delete a chat; True when it was the current one."""
        deleted_current = bool(self.store_action(lambda: self._chat.delete(conversation_id)))
        self.refresh_list()
        return deleted_current

    def confirm_delete(self, conversation_id: int) -> bool:
        title = self.store_action(lambda: self._chat.title(conversation_id))
        if title is None:
            return False
        answer = QMessageBox.question(
            self._window, "Delete conversation", f"Delete “{title}”? This cannot be undone."
        )
        return answer == QMessageBox.StandardButton.Yes

    def export(self, conversation_id: int, path: Path) -> None:
        try:
            self._chat.export(conversation_id, path)
        except (OSError, StoreError) as exc:
            self._show_error(f"Could not export the conversation to {path}: {exc}.")
            return
        self._window.statusBar().showMessage(f"Exported to {path}", 5000)

    def export_dialog(self, conversation_id: int) -> None:
        name = self.store_action(lambda: self._chat.export_name(conversation_id))
        path, _filter = QFileDialog.getSaveFileName(
            self._window,
            "Export conversation",
            str(Path.home() / (name or "conversation.md")),
            "Markdown (*.md)",
        )
        if path:
            self.export(conversation_id, Path(path))
