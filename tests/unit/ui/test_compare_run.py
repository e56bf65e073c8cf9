"""A comparison's run: it answers through its listener, a Stop before it started ends it at
once and it then never runs, and the Compare dialog shows such a Stop without waiting."""

from __future__ import annotations

import threading

import pytest
from pytestqt.qtbot import QtBot

from app.bench.run import ProgressFn
from app.bench.session import PartialFn
from app.bench.summary import BenchReport
from app.engine.control import GenerationControl
from app.errors import InvalidSettingError
from tests.helpers.bench_data import seed_report
from ui.dialogs.compare_dialog import CompareDialog
from ui.workers.compare_run import CompareListener, CompareRun, ThreadCompare


class Heard:
    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []
        self.threads: set[int] = set()
        self.listener = CompareListener(
            progress=lambda done, total, text: self._add("progress", (done, total, text)),
            partial=lambda report: self._add("partial", report),
            finished=lambda report: self._add("finished", report),
            failed=lambda exc: self._add("failed", exc),
        )

    def _add(self, kind: str, value: object) -> None:
        self.threads.add(threading.get_ident())
        self.events.append((kind, value))


def test_a_run_tells_its_listener_how_it_ended() -> None:
    heard, report = Heard(), seed_report()
    run = CompareRun(GenerationControl())
    assert not run.wait(0)
    run.deliver(lambda: report, heard.listener)
    assert heard.events == [("finished", report)] and run.wait(0)

    failing = CompareRun(GenerationControl())
    error = InvalidSettingError("write a prompt to compare on")

    def refuse() -> BenchReport:
        raise error

    failing.deliver(refuse, heard.listener)
    assert heard.events[-1] == ("failed", error) and failing.wait(0)


def test_a_stop_before_the_run_started_ends_it_and_it_never_runs() -> None:
    heard = Heard()
    run = CompareRun(GenerationControl())
    assert run.stop() is True
    assert run.wait(0) and run.control.stop_requested
    run.deliver(lambda: pytest.fail("a stopped comparison ran"), heard.listener)
    assert heard.events == []


def test_a_stop_after_the_run_started_is_left_to_the_engine() -> None:
    heard, report = Heard(), seed_report()
    run = CompareRun(GenerationControl())
    stopped: list[bool] = []

    def bench() -> BenchReport:
        stopped.append(run.stop())
        assert not run.wait(0)  # still running: it ends when the engine sees the flag
        return report

    run.deliver(bench, heard.listener)
    assert stopped == [False] and run.control.stop_requested
    assert heard.events == [("finished", report)] and run.wait(0)


def test_a_thread_compare_runs_the_benchmark_off_the_calling_thread() -> None:
    heard, report = Heard(), seed_report()

    def bench(
        text: str,
        progress: ProgressFn,
        control: GenerationControl,
        partial: PartialFn | None = None,
    ) -> BenchReport:
        assert not control.stop_requested and partial is heard.listener.partial
        progress(0, 1, text)
        return report

    run = ThreadCompare(bench).start("a prompt", GenerationControl(), heard.listener)
    assert run.wait(10_000)
    assert heard.events == [("progress", (0, 1, "a prompt")), ("finished", report)]
    assert threading.get_ident() not in heard.threads


class NeverStarted:
    """A source whose comparison waits behind other work on the engine thread."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, CompareRun, CompareListener]] = []

    def start(self, text: str, control: GenerationControl, listener: CompareListener) -> CompareRun:
        self.runs.append((text, CompareRun(control), listener))
        return self.runs[-1][1]


def test_the_dialog_ends_a_comparison_stopped_before_it_started(qtbot: QtBot) -> None:
    source = NeverStarted()
    dialog = CompareDialog(source, prompt="Compare on this.")
    qtbot.addWidget(dialog)
    dialog.start()
    assert dialog.running and [text for text, _, _ in source.runs] == ["Compare on this."]
    dialog.stop_button.click()
    qtbot.waitUntil(lambda: not dialog.running, timeout=5_000)
    assert dialog.status.text() == "Comparison stopped."
    assert dialog.run_button.isEnabled() and dialog.wait(0)
