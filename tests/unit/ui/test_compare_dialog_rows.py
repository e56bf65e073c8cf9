"""What the Compare dialog's rows and progress say of runs that were not made: a draft not
reached or not loadable is not called sampled, has no bar in the chart and cannot be chosen as
the chat's draft, a stopped run's bar is not full, and a new run shows nothing of the previous
one's."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from PySide6.QtWidgets import QTableWidgetItem
from pytestqt.qtbot import QtBot

from app.bench.chart import draw_speedup_chart
from app.bench.plan import BenchConfig, DraftChoice
from app.bench.prompts import BenchPrompt
from app.bench.run import ProgressFn
from app.bench.summary import BenchReport, summarize
from app.bench.table import csv_rows
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.gamma import OFF, fixed
from app.errors import NOT_GGUF, Cancelled
from tests.helpers.bench_data import round_record, run_record, seed_report, seed_rounds
from ui.dialogs.compare_dialog import CompareDialog
from ui.dialogs.compare_rows import row_texts

TIMEOUT_MS = 10_000
LOAD_ERROR = f"cannot load model /m/broken.gguf: {NOT_GGUF}"


def _texts(dialog: CompareDialog, row: int) -> list[str]:
    items = [dialog.table.item(row, c) for c in range(dialog.table.columnCount())]
    return [item.text() if isinstance(item, QTableWidgetItem) else "" for item in items]


def _greedy_report_with_unmeasured_rows() -> BenchReport:
    """Plain and the seed draft measured; "later" not reached yet; "broken" failed to load."""
    configs = [
        BenchConfig("plain", None, OFF),
        BenchConfig("seed γ=4", DraftChoice("seed", Path("seed.gguf")), fixed(4)),
        BenchConfig("later γ=4", DraftChoice("later", Path("later.gguf")), fixed(4)),
        BenchConfig("broken γ=4", DraftChoice("broken", Path("broken.gguf")), fixed(4)),
    ]
    plain_rounds = [round_record(i, 0, 0) for i in range(20)]
    return summarize(
        target="target.gguf",
        configs=configs,
        prompts=[BenchPrompt("prompt", "prompt", "hello")],
        prompt_tokens=[5],
        runs=[run_record(0, plain_rounds, sequence=0), run_record(1, seed_rounds(), sequence=1)],
        base=GenerationConfig(max_tokens=20),  # temperature 0: greedy
        repeats=1,
        errors={"broken": LOAD_ERROR},
    )


def test_a_stopped_greedy_comparison_says_which_rows_never_ran_and_how_far_it_got(
    qtbot: QtBot,
) -> None:
    reached = threading.Event()

    def bench(
        text: str, progress: ProgressFn, control: GenerationControl, partial: Any = None
    ) -> BenchReport:
        progress(2, 6, "later γ=4")
        assert partial is not None
        partial(_greedy_report_with_unmeasured_rows())
        reached.set()
        while not control.stop_requested:
            time.sleep(0.01)
        raise Cancelled("benchmark cancelled")

    dialog = CompareDialog(bench, prompt="Compare on this.")
    qtbot.addWidget(dialog)
    dialog.start()
    qtbot.waitUntil(lambda: reached.is_set() and dialog.table.rowCount() == 4, timeout=TIMEOUT_MS)
    dialog.stop()
    qtbot.waitUntil(lambda: not dialog.running, timeout=TIMEOUT_MS)

    assert dialog.status.text() == "Comparison stopped."
    seed, later, broken = (_texts(dialog, r) for r in (1, 2, 3))
    assert seed[-1] == "yes"
    assert later[0] == "later γ=4" and later[1] == "not run"
    assert broken[1] == f"Cannot load model /m/broken.gguf: {NOT_GGUF}."
    assert not any("sampling" in text for r in range(4) for text in _texts(dialog, r))
    # Two of the six runs were made: the bar says so rather than reading full.
    assert (dialog.progress.value(), dialog.progress.maximum()) == (2, 6)


def test_a_sampled_comparison_still_says_n_a_for_a_measured_row() -> None:
    (drafted,) = seed_report().configs
    sampled = dataclasses.replace(
        drafted, figures=dataclasses.replace(drafted.figures, identical_to_plain=None)
    )
    assert row_texts(sampled, greedy=False)[-1] == "n/a (sampling)"


def test_a_new_run_starts_from_an_empty_table_and_cannot_use_the_previous_runs_draft(
    qtbot: QtBot,
) -> None:
    calls: list[str] = []

    def bench(
        text: str, progress: ProgressFn, control: GenerationControl, partial: Any = None
    ) -> BenchReport:
        calls.append(text)
        if len(calls) == 1:
            return seed_report()
        while not control.stop_requested:
            time.sleep(0.01)
        raise Cancelled("benchmark cancelled")

    dialog = CompareDialog(bench, prompt="First prompt.")
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.reportReady, timeout=TIMEOUT_MS):
        dialog.start()
    qtbot.waitUntil(lambda: not dialog.running, timeout=TIMEOUT_MS)
    dialog.table.selectRow(1)
    assert dialog.selected_draft() == "draft.gguf"

    dialog.prompt.setPlainText("A completely different prompt.")
    dialog.start()
    qtbot.waitUntil(lambda: len(calls) == 2, timeout=TIMEOUT_MS)
    dialog.stop()
    qtbot.waitUntil(lambda: not dialog.running, timeout=TIMEOUT_MS)

    assert dialog.table.rowCount() == 0 and dialog.report is None
    assert dialog.selected_draft() is None and not dialog.use_button.isEnabled()
    assert not dialog.figure.axes  # no chart of the first prompt either
    assert dialog.progress.value() < dialog.progress.maximum()


def test_rows_never_measured_have_no_bar_no_use_button_and_say_why_in_the_csv(
    qtbot: QtBot,
) -> None:
    report = _greedy_report_with_unmeasured_rows()
    figure = Figure()
    draw_speedup_chart(report, figure)
    labels = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert labels == ["seed γ=4"]  # a bar at 0 would read as a measured 0×

    broken_rows = [row for row in csv_rows(report) if row["label"] == "broken γ=4"]
    assert broken_rows and all(row["error"] == LOAD_ERROR for row in broken_rows)

    dialog = CompareDialog(lambda *_a, **_k: report, prompt="x")
    qtbot.addWidget(dialog)
    dialog.show_report(report)
    for row, usable in ((1, True), (2, False), (3, False)):
        dialog.table.selectRow(row)
        assert dialog.use_button.isEnabled() is usable, row
