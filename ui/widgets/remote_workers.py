"""The "Remote workers" settings: llama.cpp RPC workers for the target and, apart, the draft.

Each field takes KEY@HOST:PORT[,...] (the key the worker printed; plain@HOST:PORT for llama.cpp's
unencrypted rpc-server) and writes its preference, keys included, once the user is done typing
and the list parses: a worker reached without its key is refused at the next start. A malformed
list is named under the fields and not saved. The security warning sits where the user types
and appears for plain workers only, and a build without RPC gets disabled fields and
the one-line rebuild command instead. Asking the build loads llama.cpp's library (half a second
or more), so the window asks once its engine has loaded it (check_build), never while opening.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFormLayout, QGroupBox, QLineEdit, QWidget

from app.errors import InvalidSettingError
from app.llama import rpc, rpc_keys
from ui.named_widgets import named_label
from ui.settings import Settings
from ui.status_text import show_status
from ui.themes import Status

TARGET_KEY = "models/target_rpc"
DRAFT_KEY = "models/draft_rpc"

_TARGET_TIP = (
    "RPC workers (`specchat worker` on other machines) that hold the target's layers, as "
    "KEY@HOST:PORT[,...] with the key each worker printed (plain@HOST:PORT for llama.cpp's "
    "rpc-server, unencrypted); empty keeps the target on this machine. See docs/rpc.md."
)
_DRAFT_TIP = (
    "RPC workers for the draft's layers. A draft is usually best kept local (leave this "
    "empty): it runs several times per round, and every network round trip costs more than "
    "its small computation saves."
)


class RemoteWorkersBox(QGroupBox):
    def __init__(
        self, settings: Settings, *, available: bool | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__("Remote workers", parent)
        self.setObjectName("remoteWorkersBox")
        self._settings = settings
        self.available: bool | None = None
        self.target = self._field("targetRpcInput", TARGET_KEY, _TARGET_TIP)
        self.draft = self._field("draftRpcInput", DRAFT_KEY, _DRAFT_TIP)
        self.problem = named_label("remoteWorkersProblem", wrap=True)
        show_status(self.problem, Status.ERROR)
        self.problem.hide()
        self.notice = named_label("remoteWorkersNotice", wrap=True)
        self._show_notice()
        form = QFormLayout(self)
        form.addRow("Target", self.target)
        form.addRow("Draft", self.draft)
        form.addRow(self.problem)
        form.addRow(self.notice)
        if available is not None:
            self.set_available(available)

    def check_build(self) -> None:
        """Ask the installed llama.cpp whether it has RPC, once."""
        if self.available is None:
            self.set_available(rpc.supports_rpc())

    def set_available(self, available: bool) -> None:
        self.available = available
        self.target.setEnabled(available)
        self.draft.setEnabled(available)
        if not available:
            self.notice.setText(
                f"This llama.cpp was built without RPC. Rebuild it with: {rpc.REBUILD_COMMAND}"
            )
            # The command is meant to be copied into a terminal.
            self.notice.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

    def _field(self, name: str, key: str, tip: str) -> QLineEdit:
        field = QLineEdit(self._settings.get_str(key))
        field.setObjectName(name)
        field.setPlaceholderText(f"this machine (e.g. KEY@192.168.1.20:{rpc.DEFAULT_PORT})")
        field.setToolTip(tip)
        field.editingFinished.connect(lambda: self._commit(field, key))
        return field

    def _commit(self, field: QLineEdit, key: str) -> None:
        text = field.text().strip()
        try:
            specs = rpc.parse_worker_specs(text) if text else ()
        except InvalidSettingError as exc:
            self.problem.setText(f"{exc}; not saved.")
            self.problem.show()
            return
        self.problem.hide()
        value = ",".join(specs)
        field.setText(value)
        self._show_notice()
        # Settings.changed makes the window reload the models (after a reply, if one runs).
        self._settings.set(key, value)

    def _show_notice(self) -> None:
        marker = f"{rpc_keys.PLAIN}@"
        plain = [
            spec.strip()[len(marker) :]
            for field in (self.target, self.draft)
            for spec in field.text().split(",")
            if spec.strip().lower().startswith(marker)
        ]
        if plain:
            reached = f"{', '.join(plain)} reached without a key or encryption"
            self.notice.setText(f"Warning: {reached}: {rpc.SECURITY_WARNING}")
        else:
            self.notice.setText(
                "A worker is reached with the key it printed at its first start, over an "
                "encrypted connection only its key holders can open."
            )
