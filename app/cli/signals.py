"""SIGINT and SIGTERM for the headless commands: stop the reply, keep what was generated.

The first signal during a generation asks the engine to stop at its next round boundary, so
`generate` still prints the partial reply (and, with --json, the JSON object with finish reason
"cancelled") before exiting 128 + the signal number. A second signal, or SIGTERM outside a
generation, ends the command at once with one `error: interrupted` line (a model's load
stops at its next progress report, a prompt's reading at its next graph node:
app/llama/callbacks.py). `serve` and `worker`
catch Interrupted themselves once running: a signal is how they are meant to stop, with status 0.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from types import FrameType
from typing import NoReturn

from app.engine.control import GenerationControl
from app.llama.callbacks import abortable_passes, raise_deferred, raise_or_defer

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """A signal ended the command; like KeyboardInterrupt, not an error of the user's input."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_at_once(signum: int) -> NoReturn:
    """End the process now, as main does for Interrupted, but without the interpreter's exit:
    for a native call that cannot be stopped and would crash if torn down under it."""
    with suppress(OSError, ValueError):  # a closed or broken stdout must not stop the exit
        sys.stdout.flush()
        print("error: interrupted", file=sys.stderr, flush=True)
    os._exit(128 + signum)


@dataclass
class CaughtSignal:
    signum: int = 0


def _in_main_thread() -> bool:
    # Python only lets the main thread install signal handlers.
    return threading.current_thread() is threading.main_thread()


@contextmanager
def interrupt_on_signals() -> Iterator[None]:
    """SIGTERM (and SIGINT) raise Interrupted, so cleanup code runs and the exit says why."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        raise_or_defer(Interrupted(signum), frame)

    with _handlers(on_signal):
        yield
        raise_deferred()  # a signal that landed in a callback no native call returned from yet


@contextmanager
def stop_on_signals(control: GenerationControl, note: str = "") -> Iterator[CaughtSignal]:
    """The first signal stops `control` (and prints `note`, for a wait the user would
    otherwise read as the signal ignored); a second raises Interrupted."""
    caught = CaughtSignal()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if caught.signum:  # asked twice: stop waiting for the round to end
            raise_or_defer(Interrupted(signum), frame)
            return
        caught.signum = signum
        control.stop()
        if note:
            with suppress(OSError, ValueError):
                print(note, file=sys.stderr, flush=True)

    with _handlers(on_signal):
        yield caught


@contextmanager
def _handlers(handler: signal._HANDLER) -> Iterator[None]:
    if not _in_main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, handler) for signum in STOP_SIGNALS}
    try:
        with abortable_passes():
            yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
