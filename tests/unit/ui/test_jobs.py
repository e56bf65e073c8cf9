"""The one background-job helper: work off the UI thread, answers, progress and errors on it,
cancelling, and a helper process for GIL-heavy work."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest
from pytestqt.qtbot import QtBot

from app.errors import Cancelled, InvalidSettingError
from ui.workers.jobs import Job, Jobs

WAIT_MS = 10_000


@pytest.fixture
def jobs(qtbot: QtBot) -> Iterator[Jobs]:
    del qtbot  # a QApplication for the queued signals
    helper = Jobs(threads=2)
    yield helper
    helper.shutdown()


def test_answers_and_progress_arrive_on_the_ui_thread(qtbot: QtBot, jobs: Jobs) -> None:
    ui_thread = threading.get_ident()
    seen: list[tuple[str, object, int]] = []

    def work(job: Job) -> object:
        for step in range(3):
            job.report(step)
        return ("done", threading.get_ident())

    jobs.submit(
        work,
        lambda value: seen.append(("done", value, threading.get_ident())),
        lambda exc: seen.append(("error", exc, threading.get_ident())),
        lambda value: seen.append(("report", value, threading.get_ident())),
    )
    assert jobs.busy
    qtbot.waitUntil(lambda: not jobs.busy, timeout=WAIT_MS)
    assert [(kind, value) for kind, value, _ in seen[:3]] == [
        ("report", 0),
        ("report", 1),
        ("report", 2),
    ]
    kind, value, thread = seen[3]
    assert kind == "done" and thread == ui_thread
    assert isinstance(value, tuple) and value[1] != ui_thread  # the work ran elsewhere
    assert all(thread == ui_thread for _kind, _value, thread in seen)


def test_errors_reach_the_error_callback(qtbot: QtBot, jobs: Jobs) -> None:
    errors: list[Exception] = []

    def fail() -> object:
        raise InvalidSettingError("no such thing")

    def interrupt() -> object:
        raise KeyboardInterrupt

    jobs.run(fail, lambda _value: None, errors.append)
    jobs.run(interrupt, lambda _value: None, errors.append)
    qtbot.waitUntil(lambda: len(errors) == 2, timeout=WAIT_MS)
    # The two run on a pool and may answer in either order.
    by_type = {type(error) for error in errors}
    # Whatever escapes the work arrives as an Exception, never a bare BaseException.
    assert by_type == {InvalidSettingError, RuntimeError}


def test_cancel_stops_the_work_and_drops_its_answer(qtbot: QtBot, jobs: Jobs) -> None:
    started, stopped = threading.Event(), threading.Event()
    answers: list[object] = []

    def work(job: Job) -> object:
        started.set()
        deadline = time.monotonic() + 10
        while not job.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)
        stopped.set()
        raise Cancelled("stopped")

    job = jobs.submit(work, answers.append, answers.append)
    qtbot.waitUntil(started.is_set, timeout=WAIT_MS)
    jobs.cancel(job)
    assert not jobs.busy  # nothing is waited for any more
    qtbot.waitUntil(stopped.is_set, timeout=WAIT_MS)
    assert jobs.wait(WAIT_MS)
    qtbot.wait(50)  # the dropped answer had its chance to arrive
    assert answers == []


def test_forget_drops_every_answer(qtbot: QtBot, jobs: Jobs) -> None:
    answers: list[object] = []
    release = threading.Event()
    jobs.run(lambda: release.wait(WAIT_MS / 1000), answers.append)
    jobs.forget()
    release.set()
    assert jobs.wait(WAIT_MS)
    qtbot.wait(50)
    assert answers == [] and not jobs.busy


def test_run_in_process_runs_in_a_helper_process(qtbot: QtBot, jobs: Jobs) -> None:
    answers: list[object] = []
    jobs.run_in_process(os.getpid, answers.append)
    qtbot.waitUntil(lambda: bool(answers), timeout=60_000)
    assert isinstance(answers[0], int) and answers[0] != os.getpid()
