"""The lower half of the Local models tab: the selected file's header, memory plan and drafts.

It shows what `model_library.judge` worked out (a frozen `Details`), marking the draft the
window has loaded; it reads nothing itself.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.paths import same_file
from ui.dialogs.model_library import Details
from ui.dialogs.tables import make_item, make_table
from ui.named_widgets import named_label
from ui.status_text import show_status
from ui.themes import Status

DRAFT_COLUMNS = ("Draft", "Quantization", "Size", "Verdict")
IN_USE = "in use"
_NO_TITLE = "Drafts for the selected target"
_DRAFT_NAME_MAX_PX = 250  # the verdict column takes what is left: it must stay readable


class ModelDetailsPane(QWidget):
    """Header fields and memory plan on the left, the ranked drafts on the right."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.loaded_draft: Path | None = None

        self.details_table = make_table(("Field", "Value"), "detailsTable", stretch=(1,), fit=(0,))
        self.details_table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.details_table.horizontalHeader().setVisible(False)
        # Neither table has a caption a screen reader could take for its name.
        self.details_table.setAccessibleName("Model details")
        self.memory_label = named_label("memoryLabel", wrap=True)
        self.memory_warning_label = named_label("memoryWarningLabel", wrap=True)
        show_status(self.memory_warning_label, Status.WARNING)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.details_table, 1)
        left_layout.addWidget(self.memory_label)
        left_layout.addWidget(self.memory_warning_label)

        self.drafts_title = QLabel(_NO_TITLE)
        self.drafts_table = make_table(DRAFT_COLUMNS, "draftsTable", stretch=(3,), fit=(1, 2))
        self.drafts_table.setAccessibleName("Drafts for the selected model")
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(self.drafts_title)
        right_layout.addWidget(self.drafts_table, 1)

        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        split.addWidget(right)
        split.setSizes([420, 680])  # the verdicts are the longer text
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(split)

    def reading(self) -> None:
        self.memory_label.setText("Reading…")
        self.memory_warning_label.clear()

    def failed(self, message: str) -> None:
        self.show_details(None)
        self.memory_label.setText(message)

    def show_details(self, details: Details | None) -> None:
        self.details_table.setRowCount(0)
        self.drafts_table.setRowCount(0)
        self.memory_label.clear()
        self.memory_warning_label.clear()
        if details is None:
            self.drafts_title.setText(_NO_TITLE)
            return
        for row, (key, value) in enumerate(details.rows):
            self.details_table.insertRow(row)
            status = Status.ERROR if key == "status" else None
            self.details_table.setItem(row, 0, make_item(key))
            self.details_table.setItem(row, 1, make_item(value, status))
        self.memory_label.setText(details.memory)
        self.memory_warning_label.setText("\n".join(details.warnings))
        usable = sum(1 for d in details.drafts if d.kind == "usable")
        self.drafts_title.setText(
            f"Drafts for {details.path.name}: {usable} usable of {len(details.drafts)} files"
            if details.drafts
            else _NO_TITLE
        )
        statuses = {"usable": Status.OK, "compatible": Status.WARNING, "refused": Status.ERROR}
        bold = QFont(self.drafts_table.font())
        bold.setBold(True)
        for row, draft in enumerate(details.drafts):
            in_use = self.loaded_draft is not None and same_file(draft.path, self.loaded_draft)
            verdict = f"{IN_USE}; {draft.verdict}" if in_use else draft.verdict
            cells = [
                make_item(draft.name, tip=str(draft.path)),
                make_item(draft.quantization),
                make_item(draft.size),
                make_item(verdict, statuses[draft.kind]),
            ]
            cells[0].setData(Qt.ItemDataRole.UserRole, str(draft.path))
            self.drafts_table.insertRow(row)
            for column, item in enumerate(cells):
                if in_use:
                    item.setFont(bold)
                self.drafts_table.setItem(row, column, item)
        self.drafts_table.resizeColumnToContents(0)
        width = self.drafts_table.columnWidth(0)
        self.drafts_table.setColumnWidth(0, min(width, _DRAFT_NAME_MAX_PX))
