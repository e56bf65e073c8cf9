"""Closing the window: everything it started is stopped, in the order that loses nothing."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, QEvent

from app.store_errors import StoreError

if TYPE_CHECKING:
    from ui.window.main_window import MainWindow


def release_window(w: MainWindow, timeout_ms: int) -> None:
    """Stop any reply or load, free the models on their thread, and close the store."""
    w.flow.stop(closing=True)
    w.models.cancel()
    w.server_switch.set_on(False)
    w.metrics_timer.stop()
    w.memory_timer.stop()
    w.dialogs.shutdown(timeout_ms)
    w.settings.set("window/geometry", w.saveGeometry())
    w.settings.set("window/splitter", w.splitter.saveState())
    w.settings.sync()
    w.host.stop(timeout_ms)
    # The worker's last signals (the stopped reply's FinishEvent) are queued for the reply
    # flow and the window now; deliver them so the partial reply is saved before the store
    # closes.
    for receiver in (w.flow, w.server_switch, w):
        QCoreApplication.sendPostedEvents(receiver, QEvent.Type.MetaCall)
    w.ops.shutdown()
    w.gpu.close()
    with contextlib.suppress(StoreError, OSError):  # the disk may have room again by now
        w.chat.save_unsaved_reply()
    w.store.close()
