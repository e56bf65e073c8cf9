"""What the window does with the list of chats: open, rename, delete, export, and the title.

Every store operation goes through store_action, so a storage failure is shown in words and
never raised into Qt's event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from PySide6.QtWidgets import QFileDialog, QMainWindow, QMessageBox, QPlainTextEdit

from app.store import StoredMessage
from app.store_errors import StoreError
from app.store_text import visible
from ui.messages import describe
from ui.named_widgets import push_button
from ui.widgets.conversation_list import ConversationList
from ui.widgets.conversation_view import ConversationView
from ui.window.chat_controller import ChatController

T = TypeVar("T")

# How long the status bar tells what Edit and resend did (its Undo stays until the edit is
# sent or the chat left).
UNDO_SHOWN_MS = 20_000
TAKEN_BACK = (
    "Your last message is back in the box to edit; it and its reply stay saved until the "
    "edited message is answered."
)
UNFITTING = "Your message is back in the box: the chat with it is longer than the context holds."
STOPPED_BACK = "Stopped before the reply began: your message is back in the box."
DELETED_ELSEWHERE = (
    "This chat was deleted in another SpecChat window; your message starts a new chat."
)


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
        self._taken: tuple[list[StoredMessage], QPlainTextEdit] | None = None
        self.undo_button = push_button(
            "Undo edit", "undoEditButton", "Put the last exchange back as it was"
        )
        self.undo_button.hide()
        self.undo_button.clicked.connect(self.undo_take_back)
        window.statusBar().addPermanentWidget(self.undo_button)

    def store_action(self, action: Callable[[], T]) -> T | None:
        """Run a store operation; a storage failure is shown in words, never raised."""
        try:
            return action()
        except (StoreError, OSError) as exc:
            self._show_error(describe(exc))
            return None

    def left_chat_deleted_elsewhere(self) -> bool:
        """True, said on the status bar, when another window deleted the open chat: a message
        cannot join it, so the caller starts a new one."""
        if not self.store_action(self._chat.deleted_elsewhere):
            return False
        self._window.statusBar().showMessage(DELETED_ELSEWHERE, 15_000)
        return True

    def refresh_list(self) -> None:
        conversations = self.store_action(self._chat.conversations) or []
        self._list.set_conversations(conversations, self._chat.conversation_id)

    def show_title(self) -> None:
        chat = self._chat
        title = chat.title() if chat.conversation_id is not None else None
        self._window.setWindowTitle(f"SpecChat — {title}" if title else "SpecChat")

    def new_chat(self) -> None:
        self.forget_take_back()
        self._chat.new_chat()
        self._view.set_messages([])
        self.refresh_list()  # also clears the selection: no conversation is current
        self.show_title()

    def open(self, conversation_id: int, *, keep_set_aside: bool = False) -> bool:
        """Show a chat; an exchange set aside for editing reappears unless `keep_set_aside`."""
        messages = self.store_action(
            lambda: self._chat.open(conversation_id, keep_set_aside=keep_set_aside)
        )
        if messages is None:
            return False
        self._view.set_messages(messages)
        self.show_title()
        return True

    def reopen_current(self) -> None:
        """Show the current chat again (after messages were taken out of it)."""
        if self._chat.conversation_id is not None:
            self.open(self._chat.conversation_id, keep_set_aside=True)

    def copy_last_reply(self) -> None:
        replies = [m for m in self._view.messages if m.role == "assistant" and m.text]
        if replies:
            self._view.copy_text(replies[-1].text)

    def take_back_last_message(
        self, box: QPlainTextEdit, *, said: str = TAKEN_BACK, keep_stored: bool = True
    ) -> bool:
        """Move the last message the user wrote (and what followed it) back into `box`;
        `said` on the status bar. Kept stored until the reply to the edited message replaces
        it, with an Undo that shows it again; deleted now when not `keep_stored` (a message
        that went unanswered), with no Undo of its own."""
        taken = self.store_action(
            lambda: self._chat.take_back_last_message(keep_stored=keep_stored)
        )
        if not taken:
            return False
        self.reopen_current()
        box.setPlainText(taken[0].content)
        box.setFocus()
        if self._chat.edit_pending:  # set aside now, or by an Edit before this message
            self._taken = (taken, box)
            self.undo_button.show()
        self._window.statusBar().showMessage(said, UNDO_SHOWN_MS)
        return True

    def take_back_unfitting(self, box: QPlainTextEdit) -> None:
        """The message just sent overflows the context: back to `box` to shorten."""
        self._take_back_unanswered(box, UNFITTING, "shorten it to start the chat")

    def take_back_stopped(self, box: QPlainTextEdit) -> None:
        """The reply to the message just sent was stopped before any text: the message goes
        back to `box` to edit or send again, unless the box holds another (typed meanwhile)."""
        if not box.toPlainText().strip():
            self._take_back_unanswered(box, STOPPED_BACK, "send it again to start the chat")

    def _take_back_unanswered(self, box: QPlainTextEdit, said: str, if_first: str) -> None:
        """Deleted now: the chat is not left on a message with no reply. A chat it began
        goes with it, or it would stay in the list with nothing in it."""
        if not self.take_back_last_message(box, said=said, keep_stored=False):
            return
        if self.store_action(self._chat.drop_if_empty):
            self.forget_take_back()  # nothing is left to put it back into
            self._view.set_messages([])
            self.refresh_list()
            self.show_title()
            self._window.statusBar().showMessage(
                f"Your message is back in the box: {if_first}.", UNDO_SHOWN_MS
            )

    def undo_take_back(self) -> None:
        """Show the exchanges set aside for editing again, and empty the box if it still
        holds the message taken back."""
        if self._taken is None:
            return
        (taken, box), self._taken = self._taken, None
        self.forget_take_back()
        if taken[0].conversation_id != self._chat.conversation_id:
            return
        self._chat.restore_set_aside()
        self.reopen_current()
        if box.toPlainText() == taken[0].content:
            box.clear()
        self._window.statusBar().showMessage("Edit undone: the exchange is back.", 5000)

    def forget_take_back(self) -> None:
        """Something else happened to the chat (a message sent, another chat opened)."""
        self._taken = None
        self.undo_button.hide()
        status = self._window.statusBar()
        if status.currentMessage() in (TAKEN_BACK, UNFITTING, STOPPED_BACK):  # now untrue
            status.clearMessage()

    def rename(self, conversation_id: int, title: str) -> None:
        if not visible(title):
            # A title cleared in the list's editor, or spaces: the chat keeps its own, which
            # the list shows again (the store would have made it "Untitled" for good).
            self.refresh_list()
            return
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
            # The reason alone: an OSError's text repeats the path it failed on, and that is
            # the temporary file the export is written to first, a name the user never chose.
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self._show_error(f"Could not export the conversation to {path}: {why}.")
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
