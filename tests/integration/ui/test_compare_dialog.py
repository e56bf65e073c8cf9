"""The Compare dialog runs the benchmark off the UI thread, shows its table and chart, stops on
request and reports errors in words."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import pytest
from PySide6.QtWidgets import QTableWidgetItem
from pytestqt.qtbot import QtBot

from app.bench.plan import DraftChoice
from app.bench.run import ProgressFn
from app.bench.session import prompt_bench
from app.bench.summary import BenchReport
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.gamma import AUTO, fixed
from app.errors import Cancelled, InvalidSettingError
from app.llama.config import ModelConfig
from tests.helpers.bench_data import seed_report
from ui.dialogs.compare_dialog import CompareDialog


def _cell(dialog: CompareDialog, row: int, column: str) -> str:
    table = dialog.table
    headers = [_text(table.horizontalHeaderItem(c)) for c in range(table.columnCount())]
    return _text(table.item(row, headers.index(column)))


def _text(item: QTableWidgetItem | None) -> str:
    assert item is not None
    return item.text()


def test_report_arrives_from_a_worker_thread(qtbot: QtBot) -> None:
    calls: list[tuple[str, int]] = []

    def bench(
        text: str, progress: ProgressFn, control: GenerationControl, partial: Any = None
    ) -> BenchReport:
        calls.append((text, threading.get_ident()))
        for i in range(3):
            progress(i, 3, f"run {i}")
            time.sleep(0.05)
        return seed_report()

    dialog = CompareDialog(bench, prompt="Compare on this.")
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.reportReady, timeout=10_000):
        dialog.run_button.click()
        assert dialog.running and not dialog.run_button.isEnabled()
    qtbot.waitUntil(lambda: not dialog.running, timeout=5_000)
    assert calls == [("Compare on this.", calls[0][1])]
    assert calls[0][1] != threading.get_ident()  # never on the UI thread

    assert dialog.table.rowCount() == 2
    assert _cell(dialog, 0, "configuration") == "plain"
    assert _cell(dialog, 1, "configuration") == "seed draft γ=4"
    assert _cell(dialog, 1, "speedup") == "2.38×"
    assert _cell(dialog, 1, "predicted") == "2.38×"
    assert _cell(dialog, 1, "tokens/round") == "3.33"
    assert _cell(dialog, 1, "same as plain") == "yes"
    axes = dialog.figure.axes
    assert len(axes) == 1 and len(axes[0].patches) >= 1  # one bar per configuration
    assert dialog.status.text() == "Done. Fastest: seed draft γ=4, 2.38× as fast as plain decoding."
    assert dialog.progress.value() == dialog.progress.maximum()  # the bar ends full
    assert dialog.run_button.isEnabled() and not dialog.stop_button.isEnabled()


@pytest.mark.parametrize(
    ("speedup", "verdict"),
    [
        (
            1.03,
            "Done. No draft was clearly faster than plain decoding (best: seed draft γ=4, 1.03×).",
        ),
        (0.80, "Done. Every draft was slower than plain decoding (best: seed draft γ=4, 0.80×)."),
        (1.20, "Done. Fastest: seed draft γ=4, 1.20× as fast as plain decoding."),
    ],
)
def test_a_draft_within_noise_of_plain_is_not_called_the_fastest(
    qtbot: QtBot, speedup: float, verdict: str
) -> None:
    """A draft a few percent either side of plain decoding (one prompt, one run) is reported
    as no faster, in the band the window's headline calls "about as fast"."""
    seeded = seed_report()
    (drafted,) = seeded.configs  # the plain row is apart (BenchReport.plain)
    figures = dataclasses.replace(
        drafted.figures, speedup=speedup, speedup_min=speedup, speedup_max=speedup
    )
    report = dataclasses.replace(seeded, configs=[dataclasses.replace(drafted, figures=figures)])

    def bench(
        text: str, progress: ProgressFn, control: GenerationControl, partial: Any = None
    ) -> BenchReport:
        return report

    dialog = CompareDialog(bench, prompt="Compare on this.")
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.reportReady, timeout=10_000):
        dialog.run_button.click()
    qtbot.waitUntil(lambda: not dialog.running, timeout=5_000)
    assert dialog.status.text() == verdict


def test_rows_fill_as_each_draft_is_measured(qtbot: QtBot) -> None:
    """Compare shows each draft's figures when its runs end, not all at the end."""
    release = threading.Event()

    def bench(
        text: str, progress: ProgressFn, control: GenerationControl, partial: Any = None
    ) -> BenchReport:
        assert partial is not None
        partial(seed_report())
        release.wait(10)
        return seed_report()

    dialog = CompareDialog(bench, prompt="Compare on this.")
    qtbot.addWidget(dialog)
    dialog.run_button.click()
    try:
        qtbot.waitUntil(lambda: dialog.table.rowCount() == 2, timeout=10_000)
        assert dialog.running  # the rows came while the comparison still ran
        assert _cell(dialog, 1, "speedup") == "2.38×"
    finally:
        release.set()
    qtbot.waitUntil(lambda: not dialog.running, timeout=10_000)


def test_stop_cancels_a_running_comparison(qtbot: QtBot) -> None:
    started = threading.Event()

    def bench(
        text: str, progress: ProgressFn, control: GenerationControl, partial: Any = None
    ) -> BenchReport:
        started.set()
        deadline = time.monotonic() + 10
        while not control.stop_requested and time.monotonic() < deadline:
            time.sleep(0.01)
        raise Cancelled("benchmark cancelled")

    dialog = CompareDialog(bench)
    qtbot.addWidget(dialog)
    dialog.start()
    qtbot.waitUntil(started.is_set, timeout=5_000)
    dialog.stop_button.click()
    qtbot.waitUntil(lambda: not dialog.running, timeout=5_000)
    assert dialog.status.text() == "Comparison stopped."
    assert dialog.report is None


def test_errors_show_as_one_sentence(qtbot: QtBot) -> None:
    def bench(
        text: str, progress: ProgressFn, control: GenerationControl, partial: Any = None
    ) -> BenchReport:
        raise InvalidSettingError("write a prompt to compare on")

    dialog = CompareDialog(bench)
    qtbot.addWidget(dialog)
    dialog.start()
    qtbot.waitUntil(lambda: not dialog.running, timeout=5_000)
    assert dialog.status.text() == "Write a prompt to compare on."


def test_closing_while_running_stops_and_joins_the_thread(qtbot: QtBot) -> None:
    def bench(
        text: str, progress: ProgressFn, control: GenerationControl, partial: Any = None
    ) -> BenchReport:
        while not control.stop_requested:
            time.sleep(0.01)
        raise Cancelled("benchmark cancelled")

    dialog = CompareDialog(bench)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.start()
    assert dialog.running
    dialog.close()
    assert dialog.wait(0)  # close() stopped the run and waited for it


def test_real_comparison_on_the_demo_models(qtbot: QtBot, demo_models: Any) -> None:
    bench = prompt_bench(
        target=ModelConfig(str(demo_models.f32), n_ctx=512, n_threads=1),
        drafts=[DraftChoice("Q4_1", demo_models.q4_1)],
        gammas=[fixed(3), AUTO],
        base=GenerationConfig(max_tokens=8, gamma=fixed(4)),
        draft_template=ModelConfig(str(demo_models.q4_1), n_ctx=512, n_threads=1),
    )
    dialog = CompareDialog(bench, prompt="Name two rivers.")
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.reportReady, timeout=300_000) as blocker:
        dialog.start()
    report = blocker.args[0]
    assert isinstance(report, BenchReport)
    assert [c.label for c in report.configs] == ["Q4_1 γ=3", "Q4_1 γ=auto"]
    assert dialog.table.rowCount() == 3
    assert _cell(dialog, 1, "same as plain") == "yes"
    assert _cell(dialog, 2, "same as plain") == "yes"


def test_an_empty_prompt_is_refused_before_loading(qtbot: QtBot, tmp_path: Any) -> None:
    bench = prompt_bench(
        target=ModelConfig(str(tmp_path / "missing.gguf")),
        drafts=[DraftChoice("d", None)],
        gammas=[fixed(2)],
        base=GenerationConfig(),
    )
    with pytest.raises(InvalidSettingError, match="write a prompt"):
        bench("   ", lambda *_: None, GenerationControl())


def _shown_with_report(qtbot: QtBot) -> CompareDialog:
    def bench(
        text: str, progress: ProgressFn, control: GenerationControl, partial: Any = None
    ) -> BenchReport:
        return seed_report()

    dialog = CompareDialog(bench, prompt="Compare on this.")
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    with qtbot.waitSignal(dialog.reportReady, timeout=10_000):
        dialog.start()
    qtbot.waitUntil(lambda: not dialog.running, timeout=5_000)
    return dialog


def test_use_this_draft_hands_the_rows_draft_file_to_the_window(qtbot: QtBot) -> None:
    dialog = _shown_with_report(qtbot)
    assert not dialog.use_button.isEnabled()  # nothing selected yet
    dialog.table.selectRow(0)  # plain decoding has no draft to use
    assert not dialog.use_button.isEnabled()
    dialog.table.selectRow(1)
    assert dialog.use_button.isEnabled()
    with qtbot.waitSignal(dialog.draftChosen, timeout=1_000) as chosen:
        dialog.use_button.click()
    assert chosen.args == ["draft.gguf"]
    assert dialog.status.text() == "Loading draft.gguf as the chat's draft."
    # It said "Loading" long after the window had loaded it.
    dialog.chat_draft_loaded("draft.gguf")
    assert dialog.status.text() == "draft.gguf is the chat's draft now."
    dialog.chat_draft_loaded("other.gguf")  # a later load, not asked for here: nothing to say
    assert dialog.status.text() == "draft.gguf is the chat's draft now."
    dialog.use_button.click()
    dialog.chat_draft_loaded("other.gguf")
    assert dialog.status.text() == "draft.gguf could not be loaded; the chat keeps its draft."


def test_every_column_and_the_axis_label_fit_at_the_default_size_and_smaller(qtbot: QtBot) -> None:
    dialog = _shown_with_report(qtbot)
    qtbot.wait(50)  # let the layout settle
    table = dialog.table
    assert table.horizontalScrollBar().maximum() == 0  # no sideways scrolling
    ttft = [_text(table.horizontalHeaderItem(c)) for c in range(table.columnCount())].index("TTFT")
    header = table.horizontalHeader()
    right = header.sectionViewportPosition(ttft) + header.sectionSize(ttft)
    assert right <= table.viewport().width()
    # Every figure is shown whole: its column is at least as wide as its text needs.
    metrics = table.fontMetrics()
    for column in range(1, table.columnCount()):
        text = _cell(dialog, 1, _text(table.horizontalHeaderItem(column)))
        assert header.sectionSize(column) >= metrics.horizontalAdvance(text), text

    _assert_axis_label_inside(dialog)
    dialog.resize(640, 480)  # smaller than the figure was drawn for: laid out again
    qtbot.waitUntil(lambda: dialog.canvas.height() < 300, timeout=2_000)
    _assert_axis_label_inside(dialog)


def _assert_axis_label_inside(dialog: CompareDialog) -> None:
    dialog.canvas.draw()  # type: ignore[no-untyped-call]
    renderer = dialog.canvas.get_renderer()  # type: ignore[no-untyped-call]
    label = dialog.figure.axes[0].yaxis.label.get_window_extent(renderer)
    width, height = dialog.canvas.get_width_height()
    assert label.x0 >= 0 and label.y0 >= 0 and label.y1 <= height and label.x1 <= width
    assert dialog.figure.axes[0].yaxis.label.get_text()
