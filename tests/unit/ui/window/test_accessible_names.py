"""What a screen reader announces for each control of the main window and its dialogs, on
stand-in models: a name of its own, never empty, never just the value it holds."""

from __future__ import annotations

from PySide6.QtGui import QAccessible
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractScrollArea,
    QAbstractSlider,
    QAbstractSpinBox,
    QComboBox,
    QHeaderView,
    QLineEdit,
    QMenuBar,
    QPlainTextEdit,
    QScrollBar,
    QTabBar,
    QTextEdit,
    QWidget,
)
from pytestqt.qtbot import QtBot

from tests.helpers.fake_window import TIMEOUT_MS
from tests.helpers.qt_window import send
from ui.window.main_window import MainWindow

_INTERACTIVE = (
    QAbstractButton,
    QComboBox,
    QAbstractSpinBox,
    QLineEdit,
    QAbstractScrollArea,
    QAbstractSlider,
    QTabBar,
)


def spoken_name(widget: QWidget) -> str:
    """The name a screen reader says: the accessible name where one is set, else the label
    the control is labelled by (its buddy: how Linux's AT-SPI names a dropdown, whose Qt
    Name is its current text), else whatever Qt reports as the Name."""
    if widget.accessibleName():
        return widget.accessibleName()
    face = QAccessible.queryAccessibleInterface(widget)
    assert face is not None
    for other, relation in face.relations(QAccessible.RelationFlag.Label):
        if relation & QAccessible.RelationFlag.Label:
            return other.text(QAccessible.Text.Name)
    return face.text(QAccessible.Text.Name)


def _value(widget: QWidget) -> str:
    if isinstance(widget, QComboBox):
        return widget.currentText()
    if isinstance(widget, QLineEdit):
        return widget.text()
    if isinstance(widget, QAbstractSpinBox):
        return widget.text()
    if isinstance(widget, QPlainTextEdit | QTextEdit):
        return widget.toPlainText()
    if isinstance(widget, QAbstractSlider):
        return str(widget.value())
    return ""


def _controls(root: QWidget) -> list[QWidget]:
    popups = [combo.view() for combo in root.findChildren(QComboBox)]
    out: list[QWidget] = []
    for widget in root.findChildren(QWidget):
        parent = widget.parentWidget()
        if not isinstance(widget, _INTERACTIVE) or isinstance(widget, QScrollBar):
            continue
        # Parts of another control (a spin box's field, a dropdown's popup list, a tab bar's
        # scroll arrows) are announced as that control.
        if isinstance(parent, QAbstractSpinBox | QComboBox | QTabBar | QAbstractItemView):
            continue
        if isinstance(widget, QHeaderView) or isinstance(parent, QMenuBar):
            continue
        if any(widget is popup for popup in popups):
            continue
        out.append(widget)
    return out


def _unnamed(root: QWidget) -> list[str]:
    bad = []
    for widget in _controls(root):
        parent = widget.parentWidget()
        name = spoken_name(widget).strip()
        value = _value(widget).strip()
        if not name or (value and name == value) or name == "✕":
            label = widget.objectName() or f"{type(widget).__name__} in {type(parent).__name__}"
            bad.append(f"{label}: {name!r}")
    return bad


def test_every_control_has_a_name_of_its_own(window: MainWindow, qtbot: QtBot) -> None:
    window.banner.show_message("Something went wrong.")
    assert _unnamed(window) == []

    send(qtbot, window, "Hello")
    models = window.open_models_dialog()
    qtbot.waitUntil(lambda: not models.busy, timeout=TIMEOUT_MS)
    assert _unnamed(models) == []
    models.close()

    compare = window.open_compare_dialog()
    assert compare is not None
    assert _unnamed(compare) == []
    compare.close()


def test_the_dropdowns_and_sliders_are_named_by_what_they_set(window: MainWindow) -> None:
    controls = window.controls
    assert spoken_name(controls.target_combo) == "Target"
    assert spoken_name(controls.draft_combo) == "Draft"
    sliders = window.insight.what_if
    assert [spoken_name(s) for s in (sliders.alpha, sliders.gamma)] == ["α", "γ"]
    assert [spoken_name(s) for s in (sliders.c_draft, sliders.c_verify)] == [
        "c_draft",
        "c_verify",
    ]
