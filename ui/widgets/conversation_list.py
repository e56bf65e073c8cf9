"""The list of saved conversations on the left, with New chat, rename, delete and export."""

# Qt signals keep Qt's camelCase (…Requested, …Changed), like Qt's own.

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QVBoxLayout,
    QWidget,
)

from app.store import ConversationSummary
from ui.named_widgets import push_button

ID_ROLE = Qt.ItemDataRole.UserRole


class ConversationList(QWidget):
    """Signals:
    newChatRequested(), conversationChosen(int), renameRequested(int, str),
    deleteRequested(int), exportRequested(int).
    """

    newChatRequested = Signal()
    conversationChosen = Signal(int)
    renameRequested = Signal(int, str)
    deleteRequested = Signal(int)
    exportRequested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.new_button = push_button(
            "New chat", "newChatButton", "Start a new conversation (Ctrl+N)"
        )
        self.list = QListWidget()
        self.list.setObjectName("conversationList")
        self.list.setAccessibleName("Conversations")
        self.list.setEditTriggers(
            QAbstractItemView.EditTrigger.DoubleClicked
            | QAbstractItemView.EditTrigger.EditKeyPressed
        )
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        # Long titles end in "…" (the tooltip has them whole) rather than a sideways scrollbar.
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.new_button)
        layout.addWidget(self.list)

        delete_action = QAction("Delete", self.list)
        delete_action.setShortcut(QKeySequence.StandardKey.Delete)
        delete_action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        delete_action.triggered.connect(self._delete_current)
        self.list.addAction(delete_action)

        self.new_button.clicked.connect(self.newChatRequested)
        self.list.currentItemChanged.connect(self._on_current_changed)
        self.list.itemChanged.connect(self._on_item_changed)
        self.list.customContextMenuRequested.connect(self._on_context_menu)
        self._filling = False

    def set_conversations(self, items: list[ConversationSummary], current: int | None) -> None:
        self._filling = True
        try:
            self.list.clear()
            for summary in items:
                item = QListWidgetItem(summary.title)
                item.setData(ID_ROLE, summary.id)
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                item.setToolTip(f"{summary.title} ({summary.message_count} messages)")
                self.list.addItem(item)
                if summary.id == current:
                    self.list.setCurrentItem(item)
        finally:
            self._filling = False

    def current_id(self) -> int | None:
        item = self.list.currentItem()
        return None if item is None else int(item.data(ID_ROLE))

    def titles(self) -> list[str]:
        return [self.list.item(i).text() for i in range(self.list.count())]

    def _on_current_changed(self, current: QListWidgetItem | None, _previous: object) -> None:
        if not self._filling and current is not None:
            self.conversationChosen.emit(int(current.data(ID_ROLE)))

    def _on_item_changed(self, item: QListWidgetItem) -> None:
        if not self._filling:
            self.renameRequested.emit(int(item.data(ID_ROLE)), item.text())

    def _delete_current(self) -> None:
        conversation = self.current_id()
        if conversation is not None:
            self.deleteRequested.emit(conversation)

    def _on_context_menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None:
            return
        conversation = int(item.data(ID_ROLE))
        menu = QMenu(self)
        menu.addAction("Rename", lambda: self.list.editItem(item))
        menu.addAction("Export as Markdown…", lambda: self.exportRequested.emit(conversation))
        menu.addSeparator()
        menu.addAction("Delete", lambda: self.deleteRequested.emit(conversation))
        menu.exec(self.list.viewport().mapToGlobal(pos))
