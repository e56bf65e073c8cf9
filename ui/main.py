"""Composition root: builds the settings, store, engine thread and window, then runs Qt."""

from __future__ import annotations

import logging
import os
import signal
import sys
from importlib.resources import files
from pathlib import Path
from typing import Unpack

from PySide6.QtCore import QTimer
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication, QMessageBox

from app.paths import DataFolderError, database_path, models_dir
from app.store import ConversationStore
from ui.dialogs.storage_recovery import open_store
from ui.messages import describe
from ui.settings import Settings, SettingsFileError
from ui.themes import apply_theme
from ui.window.main_window import MainWindow
from ui.workers.engine import EngineOptions
from ui.workers.engine_host import EngineHost

APP_NAME = "SpecChat"


def app_icon() -> QIcon:
    return QIcon(str(files("ui") / "resources" / "specchat.svg"))


def ensure_application() -> QApplication:
    app = QApplication.instance()
    if app is None:
        app = QApplication(sys.argv)
    assert isinstance(app, QApplication)
    app.setApplicationName(APP_NAME)
    app.setOrganizationName("specchat")
    # Matches packaging/specchat.desktop, so desktops group the window under its launcher.
    app.setDesktopFileName("specchat")
    app.setWindowIcon(app_icon())
    return app


def create_window(
    store: ConversationStore | None = None,
    settings: Settings | None = None,
    models_folder: Path | None = None,
    **engine: Unpack[EngineOptions],
) -> MainWindow:
    """Build a window with its own engine thread; the caller shows it and calls start().

    engine: `runtime`, the engine the worker thread owns; `check_file`, which vets a model file
    before it loads; `remote_runtime`, which makes the engine for models on RPC workers (an
    IsolatedRuntime). Tests pass stand-ins for each."""
    host = EngineHost(**engine)
    window = MainWindow(
        settings or Settings(),
        store or ConversationStore(database_path()),
        host,
        models_folder=models_folder or models_dir(),
    )
    # The host is owned by the window so the engine thread lives exactly as long as it.
    host.setParent(window)
    return window


def run_app() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app = ensure_application()
    try:
        database = database_path()
        settings = Settings()
    except (DataFolderError, SettingsFileError) as exc:  # a file in its way: one sentence
        print(f"error: {describe(exc)}", file=sys.stderr)
        QMessageBox.critical(None, APP_NAME, describe(exc))
        return 1
    store = open_store(database)
    if store is None:
        return 1
    apply_theme(app, settings.get_str("view/theme"))
    window = create_window(store, settings)
    window.show()
    window.start()
    if os.environ.get("SPECCHAT_SMOKE"):
        # Packaging checks: once the models are loaded and the helper process has listed
        # them (so a spawned child worked too), close the window as a user would.
        window.catalogChanged.connect(window.close)
    # Qt's loop does not run Python signal handlers; a periodic no-op timer gives Python the
    # chance to, so Ctrl+C in the terminal closes the window cleanly instead of being ignored.
    signal.signal(signal.SIGINT, lambda *_: window.close())
    wakeup = QTimer()
    wakeup.timeout.connect(lambda: None)
    wakeup.start(250)
    code = app.exec()
    window.shutdown()
    return int(code)
