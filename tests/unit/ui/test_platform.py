"""Guards on the platform the window stands on: the Qt binding and the desktop files."""

from __future__ import annotations

import configparser
import sys
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QCheckBox
from pytestqt.qtbot import QtBot

from ui.main import app_icon

ROOT = Path(__file__).parents[3]


class _Emitter(QObject):
    fired = Signal(bool)


def test_the_qt_binding_does_not_corrupt_reference_counts(qtbot: QtBot) -> None:
    # PySide6 6.12.0 on Python 3.11 returns True from Signal.emit() without a reference and
    # drops a reference to None per Python slot call; True or None then reaches refcount 0
    # and the interpreter aborts (bool_dealloc / none_dealloc) after a few hundred tokens.
    emitter = _Emitter()
    emitter.fired.connect(lambda _on: None)
    box = QCheckBox()
    box.toggled.connect(lambda _on: None)
    true_before, none_before = sys.getrefcount(True), sys.getrefcount(None)
    for i in range(200):
        emitter.fired.emit(True)
        box.setChecked(i % 2 == 0)
    assert sys.getrefcount(True) >= true_before - 20
    assert sys.getrefcount(None) >= none_before - 20


def test_desktop_entry() -> None:
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str  # type: ignore[assignment,method-assign]
    entry.read(ROOT / "packaging" / "specchat.desktop", encoding="utf-8")
    section = entry["Desktop Entry"]
    assert section["Type"] == "Application"
    assert section["Exec"] == "specchat"  # the console script opens the window
    assert section["Icon"] == "specchat"
    assert section["Name"] == "SpecChat"
    assert section["Categories"].endswith(";")
    assert section["StartupWMClass"] == "specchat"  # ui.main sets the desktop file name


def test_icon_is_one_svg_that_qt_can_draw(qtbot: QtBot) -> None:
    packaged = (ROOT / "packaging" / "specchat.svg").read_bytes()
    assert packaged == (ROOT / "ui" / "resources" / "specchat.svg").read_bytes()
    icon: QIcon = app_icon()
    assert not icon.isNull()
    image = icon.pixmap(64, 64).toImage()
    assert image.width() == 64
    assert image.pixelColor(32, 32).alpha() == 255  # painted, not empty
