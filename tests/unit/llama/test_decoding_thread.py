"""A pass on a second thread while the first still lives is said once: llama.cpp's OpenMP
workers of both threads then compete for the cores."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest
from PySide6.QtCore import QThread

from app.llama import backend


@pytest.fixture(autouse=True)
def _fresh_process_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(backend, "_decoding_thread", None)
    monkeypatch.setattr(backend, "_decoding_thread_id", 0)
    monkeypatch.setattr(backend, "_warned_of_threads", False)
    yield


def _pass_on_thread(hold: threading.Event | None = None) -> threading.Thread:
    """A thread that runs a pass, then lives until `hold` is set (ends at once without)."""

    ran = threading.Event()

    def run() -> None:
        backend.check_decoding_thread()
        ran.set()
        if hold is not None:
            hold.wait(10)

    thread = threading.Thread(target=run, name="other")
    thread.start()
    assert ran.wait(10)
    if hold is None:
        thread.join()
    return thread


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_passes_on_one_thread_say_nothing(caplog: pytest.LogCaptureFixture) -> None:
    for _ in range(3):
        backend.check_decoding_thread()
    assert _warnings(caplog) == []


def test_a_pass_after_a_thread_that_has_ended_says_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _pass_on_thread()
    backend.check_decoding_thread()
    assert _warnings(caplog) == []


def test_a_pass_while_the_thread_before_still_lives_is_warned_of_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hold = threading.Event()
    other = _pass_on_thread(hold)
    try:
        backend.check_decoding_thread()
        backend.check_decoding_thread()
    finally:
        hold.set()
        other.join()
    (warning,) = _warnings(caplog)
    assert "'other'" in warning and "half speed" in warning


class _QtPass(QThread):
    """The window's engine thread's kind: a thread Python did not start, whose passes run in
    run(); it returns once `hold` is set (at once without)."""

    def __init__(self, hold: threading.Event | None = None) -> None:
        super().__init__()
        self.hold = hold
        self.ran = threading.Event()

    def run(self) -> None:
        backend.check_decoding_thread()
        self.ran.set()
        if self.hold is not None:
            self.hold.wait(10)


def test_a_pass_after_a_qt_thread_that_has_ended_says_nothing(
    qapp: object, caplog: pytest.LogCaptureFixture
) -> None:
    # Python 3.11 reports a thread it did not start alive for ever: a window closed in this
    # process, its engine thread ended, had every later window's first pass warned of.
    engine = _QtPass()
    engine.start()
    assert engine.wait(10_000) and engine.ran.is_set()
    backend.check_decoding_thread()
    assert _warnings(caplog) == []


def test_a_pass_while_a_qt_thread_before_still_runs_is_warned_of(
    qapp: object, caplog: pytest.LogCaptureFixture
) -> None:
    hold = threading.Event()
    engine = _QtPass(hold)
    engine.start()
    try:
        assert engine.ran.wait(10)
        backend.check_decoding_thread()
    finally:
        hold.set()
        engine.wait(10_000)
    (warning,) = _warnings(caplog)
    assert "half speed" in warning
