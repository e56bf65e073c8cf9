"""The conversation half of the window: the store, the current chat, its history and replies.

Knows nothing of widgets: the window asks it for what to show and tells it what the user did.
Store errors propagate as StoreError (or OSError) so the window can say what failed and keep
what the user typed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.durable import replace_file
from app.engine.chat_template import ChatMessage
from app.store import ConversationStore, ConversationSummary, Segment, StoredMessage
from app.store_text import visible
from ui.settings import Settings
from ui.widgets.conversation_view import ViewMessage
from ui.window.index_files import forget_index_files

TITLE_LENGTH = 48
_EXPORT_NAME_BYTES = 120


@dataclass(frozen=True, slots=True)
class _UnsavedReply:
    """A finished reply the store refused (a full disk): shown, and saved at the next chance."""

    conversation_id: int
    text: str
    stats: dict[str, Any]
    segments: list[Segment] | None
    replacing: tuple[int, ...]  # a regenerated reply; an edited exchange
    edited_away: bool  # the replaced hold an exchange taken back: text the user replaced


class ChatController:
    def __init__(
        self,
        store: ConversationStore,
        settings: Settings,
        *,
        on_text_deleted: Callable[[], None] | None = None,
    ) -> None:
        """on_text_deleted: called once a commit has deleted what the user wrote (an exchange
        taken back and replaced), to have the past-chats index rebuilt without it."""
        self.store = store
        self._settings = settings
        self._on_text_deleted = on_text_deleted
        self.conversation_id: int | None = None
        # The current chat's last exchange, taken back for editing: still stored (a close or a
        # crash keeps it), out of view and out of the model's history, and deleted in the
        # commit that stores the reply to the edited message (a reply stopped before any text
        # leaves the edit pending, as a regenerated reply leaves the reply it would replace).
        self._set_aside: list[StoredMessage] = []
        self._unsaved: _UnsavedReply | None = None

    # -- the list of chats --------------------------------------------------------------------

    def conversations(self) -> list[ConversationSummary]:
        return self.store.conversations()

    def title(self, conversation_id: int | None = None) -> str | None:
        key = self.conversation_id if conversation_id is None else conversation_id
        summary = self.store.conversation(key) if key is not None else None
        return summary.title if summary else None

    def new_chat(self) -> None:
        self.conversation_id = None
        self._set_aside = []

    def open(self, conversation_id: int, *, keep_set_aside: bool = False) -> list[ViewMessage]:
        """Make a saved chat current; returns its messages as the view shows them. An exchange
        set aside for editing shows again (the edit abandoned) unless `keep_set_aside`."""
        if not keep_set_aside or conversation_id != self.conversation_id:
            self._set_aside = []
        self.conversation_id = conversation_id
        messages = []
        for stored in self._shown(self.store.messages(conversation_id)):
            if stored.role == "system":
                continue
            line = str(stored.stats.get("summary", "")) if stored.stats else ""
            messages.append(ViewMessage(stored.role, stored.content, stored.segments, line))
        return messages

    def rename(self, conversation_id: int, title: str) -> None:
        self.store.rename(conversation_id, title)

    def delete(self, conversation_id: int) -> bool:
        """Delete a chat; True when it was the current one (which is then closed)."""
        self._deleting_text(lambda: self.store.delete(conversation_id))
        if conversation_id != self.conversation_id:
            return False
        self.new_chat()
        return True

    def export(self, conversation_id: int, path: Path) -> None:
        """Write the chat as Markdown to `path`, whole or not at all: a full disk or a crash
        mid-write leaves the file the user chose to replace as it was (app/durable.py)."""
        text = self.store.export_markdown(conversation_id)
        replace_file(path, lambda temporary: temporary.write_text(text, encoding="utf-8"))

    def export_name(self, conversation_id: int) -> str:
        """The title as a file name any file system takes: no separators or characters
        Windows refuses, and short enough in bytes (most allow 255)."""
        name = re.sub(r'[/\\:*?"<>|]', "-", self.title(conversation_id) or "conversation")
        while len(name.encode("utf-8")) > _EXPORT_NAME_BYTES:
            name = name[:-1]
        stem = name.strip(" .") or "conversation"  # "..": no name of its own
        return f"{stem}.md"

    # -- messages -----------------------------------------------------------------------------

    def deleted_elsewhere(self) -> bool:
        """The open chat is gone from the store: another window on the data folder deleted it."""
        return (
            self.conversation_id is not None
            and self.store.conversation(self.conversation_id) is None
        )

    def add_user_message(self, text: str) -> int:
        """Save the user's message (starting a chat if none is current); returns the chat id.

        Committed before anything is generated, so a crash mid-reply never loses the question.
        """
        self.save_unsaved_reply()  # first, so the chat keeps its order and the model reads it
        if self.conversation_id is None:
            self.conversation_id = self.store.create_conversation(visible(text)[:TITLE_LENGTH])
        self.store.add_message(self.conversation_id, "user", text)
        return self.conversation_id

    def save_reply(
        self,
        conversation_id: int,
        text: str,
        stats: dict[str, Any],
        segments: list[Segment] | None,
        *,
        replaces: int | None = None,
    ) -> None:
        """Store a finished reply; `replaces`: the reply it was regenerated from, which stays
        stored until then (a crash mid-reply keeps it) and goes in the same commit. One the
        store refuses is kept, and saved before the next message (save_unsaved_reply)."""
        edited_away = tuple(s.id for s in self._set_aside if s.conversation_id == conversation_id)
        replacing = edited_away
        if replaces is not None:
            replacing += (replaces,)
        reply = _UnsavedReply(conversation_id, text, stats, segments, replacing, bool(edited_away))
        self.save_unsaved_reply()
        self._set_aside = []  # stored with this reply, or with it once the store takes it
        try:
            self._store_reply(reply)
        except BaseException:
            self._unsaved = reply
            raise

    def save_unsaved_reply(self) -> bool:
        """Store the reply the store refused before, if any (True once none is left); raises
        as the store does while it still cannot. One whose chat was deleted meanwhile (in
        another window) is dropped."""
        reply = self._unsaved
        if reply is None:
            return True
        if self.store.conversation(reply.conversation_id) is not None:
            self._store_reply(reply)
        self._unsaved = None
        return True

    def _store_reply(self, reply: _UnsavedReply) -> None:
        def store() -> None:
            self.store.add_message(
                reply.conversation_id,
                "assistant",
                reply.text,
                stats=reply.stats,
                segments=reply.segments,
                replacing=reply.replacing,
            )

        if reply.edited_away:  # the exchange the user took back goes in the same commit
            self._deleting_text(store, rebuild_on_failure=False)
        else:
            store()

    def _deleting_text(
        self, commit: Callable[[], None], *, rebuild_on_failure: bool = True
    ) -> None:
        """Run a commit that deletes what the user wrote, which must never draft again: the
        past-chats index files go first (a crash after the commit must not leave them holding
        it), and the index is rebuilt after (on_text_deleted). A chat's delete that fails has
        the index rebuilt all the same, its files being gone; an edit's reply the store refused
        is kept and stored later (save_unsaved_reply), with the rebuild then."""
        forget_index_files()
        try:
            commit()
        except BaseException:
            if rebuild_on_failure and self._on_text_deleted is not None:
                self._on_text_deleted()
            raise
        if self._on_text_deleted is not None:
            self._on_text_deleted()

    def last_reply_id(self) -> int | None:
        """The reply Regenerate would write again; None while an edit is pending (a reply
        regenerated then would be stored after the exchange set aside)."""
        if self.conversation_id is None or self._set_aside:
            return None
        messages = self._shown(self.store.messages(self.conversation_id))
        if messages and messages[-1].role == "assistant":
            return messages[-1].id
        return None

    def _shown(self, messages: list[StoredMessage]) -> list[StoredMessage]:
        """The current chat's messages less the exchange set aside for editing."""
        aside = {stored.id for stored in self._set_aside}
        return [stored for stored in messages if stored.id not in aside]

    def take_back_last_message(self, *, keep_stored: bool = True) -> list[StoredMessage] | None:
        """The current chat's last user message and what followed it, the user's first, for
        the user to edit and send again, or to put back (None when there is none). Kept
        stored until the reply to the edited message replaces them (`save_reply`); deleted
        now with `keep_stored` False (a message that went, or can go, unanswered)."""
        if self.conversation_id is None:
            return None
        messages = self._shown(self.store.messages(self.conversation_id))
        users = [i for i, m in enumerate(messages) if m.role == "user"]
        if not users:
            return None
        taken = messages[users[-1] :]
        if keep_stored:
            self._set_aside = [*self._set_aside, *taken]
        else:
            for stored in reversed(taken):
                self.store.delete_message(stored.id)
        return taken

    def drop_if_empty(self) -> bool:
        """Delete the current chat when it holds no message (its only one was taken back);
        True when it did. Nothing of it reached the past-chats index: only replies do."""
        if self.conversation_id is None or self.store.messages(self.conversation_id):
            return False
        self.store.delete(self.conversation_id)
        self.conversation_id = None
        return True

    @property
    def edit_pending(self) -> bool:
        """An exchange is set aside for editing (out of view, still stored)."""
        return bool(self._set_aside)

    def restore_set_aside(self) -> None:
        """Undo every Edit since the last reply: what they set aside shows again. Nothing
        to write: it never left the store."""
        self._set_aside = []

    def last_prompt(self) -> str | None:
        """The current chat's last user message, the prompt a comparison runs on."""
        if self.conversation_id is None:
            return None
        for stored in reversed(self._shown(self.store.messages(self.conversation_id))):
            if stored.role == "user":
                return stored.content
        return None

    def history(self, *, without: int | None = None) -> tuple[ChatMessage, ...]:
        """What the model reads: the system prompt, then the current chat as saved, less
        `without` (the reply being regenerated, which stays stored until replaced)."""
        assert self.conversation_id is not None
        history: list[ChatMessage] = []
        system = self._settings.get_str("generation/system_prompt").strip()
        if system:
            history.append({"role": "system", "content": system})
        for stored in self._shown(self.store.messages(self.conversation_id)):
            if stored.id != without:
                history.append({"role": stored.role, "content": stored.content})
        return tuple(history)
