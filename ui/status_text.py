"""Status text (an error, a usable draft, a warning) that keeps reading after a theme change.

Its colour is worked out from the palette in use (ui/themes.status_color) and then fixed in a
style sheet or an item's brush, which a later palette does not touch: a dark theme's light red
on the light theme's background reads at under 2.3:1. Widgets coloured here are coloured again
whenever the application's palette changes.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QLabel, QTableWidget, QTableWidgetItem

from ui.themes import Status, status_color, status_style

# Where a table item keeps its Status, to be coloured again with the theme.
STATUS_ROLE = Qt.ItemDataRole.UserRole + 41
_STATUS_PROPERTY = "statusText"
_PALETTE_EVENTS = (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange)


def show_status(label: QLabel, status: Status | None) -> None:
    """Colour the label's text as `status` says (None: plain), now and after theme changes."""
    label.setProperty(_STATUS_PROPERTY, "" if status is None else status.value)
    _restyle(label)
    _follow_theme(label)


def colour_item(item: QTableWidgetItem, status: Status) -> None:
    """Colour a table item's text as `status` says; make_table's tables keep it in step."""
    item.setData(STATUS_ROLE, status.value)
    item.setForeground(status_color(status))


def follow_theme(table: QTableWidget) -> None:
    """Colour the table's status items again whenever the theme changes."""
    _follow_theme(table)


class _ThemeFollower(QObject):
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in _PALETTE_EVENTS:
            if isinstance(watched, QLabel):
                _restyle(watched)
            elif isinstance(watched, QTableWidget):
                _recolour(watched)
        return False


_FOLLOWER: _ThemeFollower | None = None


def _follow_theme(widget: QLabel | QTableWidget) -> None:
    global _FOLLOWER  # noqa: PLW0603 - one filter serves every widget
    if _FOLLOWER is None:
        _FOLLOWER = _ThemeFollower()
    widget.removeEventFilter(_FOLLOWER)  # installed once, however often the status changes
    widget.installEventFilter(_FOLLOWER)


def _restyle(label: QLabel) -> None:
    value = label.property(_STATUS_PROPERTY)
    style = status_style(Status(value) if value else None)
    if label.styleSheet() != style:  # a new style sheet is itself a palette change
        label.setStyleSheet(style)


def _recolour(table: QTableWidget) -> None:
    for row in range(table.rowCount()):
        for column in range(table.columnCount()):
            item = table.item(row, column)
            value = item.data(STATUS_ROLE) if item is not None else None
            if item is not None and value:
                item.setForeground(status_color(Status(value)))
