"""Windows and dialogs open inside the screen's free area (the screen less its panels), so no
button is ever below or beside the screen, whatever size was asked for or saved."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget


def fit_to_screen(widget: QWidget) -> None:
    """Shrink `widget` (a top-level window) to its screen's free area and move it inside.

    The frame (title bar, borders) counts once the window is shown; call this again then.
    """
    free = widget.screen().availableGeometry()
    frame = widget.frameGeometry()
    frame_w = frame.width() - widget.width()
    frame_h = frame.height() - widget.height()
    width = min(widget.width(), free.width() - frame_w)
    height = min(widget.height(), free.height() - frame_h)
    if (width, height) != (widget.width(), widget.height()):
        widget.resize(width, height)
    frame = widget.frameGeometry()
    if not free.contains(frame):
        x = min(max(frame.x(), free.x()), free.right() - frame.width() + 1)
        y = min(max(frame.y(), free.y()), free.bottom() - frame.height() + 1)
        widget.move(max(x, free.x()), max(y, free.y()))
