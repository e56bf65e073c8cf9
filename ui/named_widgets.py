"""Buttons and labels made with their object name, the name tests and style sheets find them
by, and their tooltip in one call."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QPushButton


def push_button(text: str, name: str, tip: str = "") -> QPushButton:
    button = QPushButton(text)
    button.setObjectName(name)
    if tip:
        button.setToolTip(tip)
    return button


def named_label(name: str, *, wrap: bool = False) -> QLabel:
    """An empty label, filled in later; `wrap` breaks long text over lines."""
    label = QLabel()
    label.setObjectName(name)
    if wrap:
        label.setWordWrap(True)
    return label
