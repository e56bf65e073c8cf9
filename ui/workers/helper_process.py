"""Start-up of the helper process that reads GGUF headers for the window (see ui.workers.jobs).

Runs in the helper, so it must not import Qt. The helper lowers its own priority (the window
should win the CPU) and exits when the window's process is gone: a killed app must not leave
a stray process behind, holding its terminal or pipes open.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

PARENT_POLL_S = 0.5


def init_helper(nice: int) -> None:
    # Ctrl+C in a terminal reaches the whole process group; the window decides what happens,
    # the helper must not die with a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):  # a sandbox may forbid it; nothing else changes
        os.nice(nice)
    parent = os.getppid()

    def watch_parent() -> None:
        # When the parent dies the helper is re-parented (to init or a subreaper).
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=watch_parent, name="parent-watch", daemon=True).start()
