"""The Local server box: a switch, the port, an optional API key, and the URL to copy."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QWidget,
)

from ui.named_widgets import named_label, push_button
from ui.settings import INT_RANGES, Settings

SWITCH_TIP = (
    "Answer the OpenAI API on this computer (127.0.0.1) with the models loaded here, so an "
    "editor, a notes app or a script can use them. Requests take turns with your chat; the "
    "chat waits while one is answered. Other machines cannot connect."
)


class ServerPanel(QGroupBox):
    """Signals: switched(bool): the user turned the server on or off."""

    switched = Signal(bool)

    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__("Local server", parent)
        self.setObjectName("serverPanel")
        self._settings = settings
        self._url = ""
        self.switch = QCheckBox("Serve the loaded models")
        self.switch.setObjectName("serverSwitch")
        self.switch.setToolTip(SWITCH_TIP)
        self.port = QSpinBox()
        self.port.setObjectName("serverPort")
        self.port.setRange(*INT_RANGES["server/port"])
        self.port.setValue(settings.get_int("server/port"))
        self.api_key = QLineEdit(settings.get_str("server/api_key"))
        self.api_key.setObjectName("serverApiKey")
        self.api_key.setPlaceholderText("none")
        self.api_key.setEchoMode(QLineEdit.EchoMode.PasswordEchoOnEdit)
        self.api_key.setToolTip("If set, clients must send 'Authorization: Bearer <key>'.")
        self.url = QLabel("Off")
        self.url.setObjectName("serverUrl")
        self.url.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # The note wraps on a row of its own: a wrapped label beside the button was given one
        # line's height and cut, when the server was first switched on.
        self.note = named_label("serverNote", wrap=True)
        self.note.hide()
        self.copy_button = push_button("Copy URL", "copyServerUrl")
        self.copy_button.setEnabled(False)
        url_row = QHBoxLayout()
        url_row.addWidget(self.url, 1)
        url_row.addWidget(self.copy_button)
        form = QFormLayout(self)
        form.addRow(self.switch)
        form.addRow("Port", self.port)
        form.addRow("API key", self.api_key)
        form.addRow(url_row)
        form.addRow(self.note)

        self.switch.toggled.connect(self.switched)
        self.port.valueChanged.connect(lambda v: settings.set("server/port", v))
        self.api_key.editingFinished.connect(
            lambda: settings.set("server/api_key", self.api_key.text().strip())
        )
        self.copy_button.clicked.connect(self._copy)

    def show_state(self, url: str, note: str = "") -> None:
        """url "" means off; note is a line under it (an error, or requests answered)."""
        running = bool(url)
        blocked = self.switch.blockSignals(True)
        self.switch.setChecked(running)
        self.switch.blockSignals(blocked)
        self.port.setEnabled(not running)
        self.api_key.setEnabled(not running)
        self.copy_button.setEnabled(running)
        self._url = url
        self.url.setText(url if running else "Off")
        self.note.setText(note)
        self.note.setVisible(bool(note))

    def _copy(self) -> None:
        if self._url:
            QGuiApplication.clipboard().setText(self._url)
