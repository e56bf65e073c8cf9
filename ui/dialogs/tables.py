"""Read-only tables of the Models and Compare dialogs: one line per row, whole text in the
tooltip."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from ui.status_text import colour_item, follow_theme
from ui.themes import Status


def make_table(
    columns: Sequence[str], name: str, stretch: Sequence[int] = (), fit: Sequence[int] = ()
) -> QTableWidget:
    """A row-selecting table; `stretch` columns share the free width, `fit` columns take what
    their text needs, the rest are sized by the code that fills the table."""
    table = QTableWidget(0, len(columns))
    table.setObjectName(name)
    table.setHorizontalHeaderLabels(list(columns))
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    # Qt's default walks Tab from cell to cell and wraps round, so a keyboard user could never
    # reach the controls after the table; arrow keys still move between rows.
    table.setTabKeyNavigation(False)
    table.verticalHeader().setVisible(False)
    # One line per row: long paths and reasons are elided here and whole in the tooltip.
    table.setWordWrap(False)
    table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 8)
    header = table.horizontalHeader()
    header.setStretchLastSection(not stretch)
    for column in fit:
        header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
    for column in stretch:
        header.setSectionResizeMode(column, QHeaderView.ResizeMode.Stretch)
    follow_theme(table)  # its status items (make_item) are coloured again with the theme
    return table


def make_item(text: str, status: Status | None = None, tip: str | None = None) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    if status is not None:
        colour_item(item, status)
    item.setToolTip(tip if tip is not None else text)
    return item
