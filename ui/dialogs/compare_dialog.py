"""The Compare dialog: plain decoding against each draft and γ on one prompt, as a table and chart.

The benchmark is a callable (app.bench.BenchCallable: prompt text, progress callback, control)
that the dialog runs on its own QThread: a comparison takes seconds to minutes and the UI thread
must keep painting. The worker sends back only plain data through queued signals; Stop sets the
control's flag, which the engine reads between rounds.
"""

# Qt signal names are camelCase, like Qt's own (reportReady beside clicked, finished).

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.bench.chart import draw_speedup_chart
from app.bench.session import BenchCallable
from app.bench.summary import BenchReport, ConfigReport
from app.engine.control import GenerationControl
from app.errors import Cancelled, SpecChatError

log = logging.getLogger(__name__)

DASH = "—"
COLUMNS = (
    "configuration",
    "tok/s",
    "speedup",
    "predicted",
    "acceptance",
    "tokens/round",
    "c_draft",
    "c_verify",
    "TTFT",
    "same as plain",
)
COLUMN_TIPS = {
    "speedup": "tokens/s over plain decoding's on the same prompt",
    "predicted": (
        "the cost model (docs/design.md) fed by the measured per-position acceptance and costs"
    ),
    "acceptance": "accepted / drafted",
    "tokens/round": "generated tokens / verification rounds",
    "c_draft": "one draft step, in plain target steps",
    "c_verify": "one verification pass, in plain target steps",
    "same as plain": "greedy output identical to plain decoding, token for token",
}


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return DASH if value is None else f"{value:{spec}}{suffix}"


def _percent(value: float | None) -> float | None:
    return None if value is None else value * 100.0


def _row(config: ConfigReport) -> list[str]:
    f = config.figures
    plain = config.draft is None
    same = {True: "yes", False: "NO", None: "n/a (sampling)"}[f.identical_to_plain]
    return [
        config.label,
        _fmt(f.tokens_per_second, ".1f"),
        "1.00× (baseline)" if plain else _fmt(f.speedup, ".2f", "×"),
        "" if plain else _fmt(f.predicted_speedup, ".2f", "×"),
        ""
        if plain
        else _fmt(None if f.acceptance_rate is None else f.acceptance_rate * 100, ".1f", " %"),
        _fmt(f.tokens_per_round, ".2f"),
        "" if plain else _fmt(f.c_draft, ".2f"),
        "" if plain else _fmt(f.c_verify, ".2f"),
        _fmt(None if f.ttft_s is None else f.ttft_s * 1000, ".0f", " ms"),
        "" if plain else same,
    ]


class _BenchWorker(QObject):
    """Runs the benchmark callable on the dialog's thread; emits plain data only."""

    progress = Signal(int, int, str)
    finished = Signal(
        object
    )  # a BenchReport, never None (see ui/workers/ops.py on None and PySide)
    failed = Signal(str)
    cancelled = Signal()

    def __init__(self, run: BenchCallable, prompt: str, control: GenerationControl) -> None:
        super().__init__()
        self._run = run
        self._prompt = prompt
        self._control = control

    @Slot()
    def work(self) -> None:
        try:
            report = self._run(self._prompt, self._progress, self._control)
        except Cancelled:
            self.cancelled.emit()
        except SpecChatError as exc:
            self.failed.emit(str(exc))
        except Exception as exc:  # a bug: say so in the dialog rather than lose the thread
            log.exception("comparison failed")
            self.failed.emit(f"the comparison failed unexpectedly: {exc}")
        else:
            self.finished.emit(report)

    def _progress(self, done: int, total: int, message: str) -> None:
        self.progress.emit(done, total, message)


class CompareDialog(QDialog):
    """Write a prompt, press Compare, read the table and the speedup chart."""

    reportReady = Signal(object)  # the BenchReport, for whoever wants to keep it

    def __init__(
        self, run_bench: BenchCallable, parent: QWidget | None = None, prompt: str = ""
    ) -> None:
        super().__init__(parent)
        self.setObjectName("compareDialog")
        self.setWindowTitle("Compare drafts and draft lengths")
        self._run_bench = run_bench
        self._thread: QThread | None = None
        self._worker: _BenchWorker | None = None
        self._control: GenerationControl | None = None
        self.report: BenchReport | None = None

        self.prompt = QPlainTextEdit(prompt)
        self.prompt.setObjectName("comparePrompt")
        self.prompt.setPlaceholderText("A prompt to run with plain decoding and every draft…")
        self.prompt.setMaximumHeight(90)
        self.run_button = QPushButton("Compare")
        self.run_button.setObjectName("compareRunButton")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("compareStopButton")
        self.stop_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setObjectName("compareProgress")
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.status = QLabel("Runs are interleaved and start from cold caches.")
        self.status.setObjectName("compareStatus")
        self.status.setWordWrap(True)

        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("compareTable")
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        for column, name in enumerate(COLUMNS):
            header = self.table.horizontalHeaderItem(column)
            if header is not None and name in COLUMN_TIPS:
                header.setToolTip(COLUMN_TIPS[name])
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)

        # matplotlib picks the Qt binding already imported (PySide6) for its Qt canvas.
        from matplotlib.backends.backend_qtagg import FigureCanvasQTAgg  # noqa: PLC0415
        from matplotlib.figure import Figure  # noqa: PLC0415

        self.figure = Figure(figsize=(6.0, 3.2), dpi=100)
        self.canvas = FigureCanvasQTAgg(self.figure)  # type: ignore[no-untyped-call]
        self.canvas.setObjectName("compareChart")
        self.canvas.setMinimumHeight(220)

        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.progress, 1)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.table)
        splitter.addWidget(self.canvas)
        layout = QVBoxLayout(self)
        layout.addWidget(self.prompt)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        layout.addWidget(splitter, 1)
        self.resize(820, 620)

        self.run_button.clicked.connect(self.start)
        self.stop_button.clicked.connect(self.stop)

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        if self.running:
            return
        self._control = GenerationControl()
        thread = QThread(self)
        worker = _BenchWorker(self._run_bench, self.prompt.toPlainText(), self._control)
        worker.moveToThread(thread)
        thread.started.connect(worker.work)
        # The worker lives on `thread`, the dialog on the UI thread: these connections are
        # queued, so every slot below runs on the UI thread.
        worker.progress.connect(self._on_progress)
        worker.finished.connect(self._on_finished)
        worker.failed.connect(self._on_failed)
        worker.cancelled.connect(self._on_cancelled)
        for done in (worker.finished, worker.failed, worker.cancelled):
            # Direct: QThread.quit is thread-safe, and a queued quit would wait for the UI
            # thread's event loop, which is blocked in wait() when the dialog closes mid-run.
            done.connect(thread.quit, Qt.ConnectionType.DirectConnection)
        thread.finished.connect(self._on_thread_finished)
        self._thread, self._worker = thread, worker
        self.run_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.progress.setRange(0, 0)  # busy until the first progress report gives a total
        self.status.setText("Loading models…")
        thread.start()

    def stop(self) -> None:
        if self._control is not None:
            self._control.stop()
            self.status.setText("Stopping after the current round…")

    def wait(self, timeout_ms: int = 60_000) -> bool:
        """Block until the comparison thread has ended (tests, and closing the dialog)."""
        thread = self._thread
        return thread is None or thread.wait(timeout_ms)

    # -- results --------------------------------------------------------------------------------

    def show_report(self, report: BenchReport) -> None:
        self.report = report
        rows = [report.plain, *report.configs]
        self.table.setRowCount(len(rows))
        for r, config in enumerate(rows):
            for c, text in enumerate(_row(config)):
                item = QTableWidgetItem(text)
                if c > 0:
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
                if config.notices:
                    item.setToolTip("\n".join(config.notices))
                self.table.setItem(r, c, item)
        draw_speedup_chart(report, self.figure)
        self.canvas.draw_idle()  # type: ignore[no-untyped-call]

    @Slot(int, int, str)
    def _on_progress(self, done: int, total: int, message: str) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)
        self.status.setText(f"Run {min(done + 1, total)} of {total}: {message}")

    @Slot(object)
    def _on_finished(self, report: BenchReport) -> None:
        self.show_report(report)
        lines = [
            f"{d.draft}: best fixed {d.best_fixed} ({_fmt(d.best_fixed_speedup, '.2f', '×')}), "
            f"auto {_fmt(d.auto_speedup, '.2f', '×')}"
            for d in report.drafts
            if d.best_fixed is not None
        ]
        self.status.setText("Done. " + "; ".join(lines))
        self.reportReady.emit(report)

    @Slot(str)
    def _on_failed(self, message: str) -> None:
        self.status.setText(f"Error: {message}")

    @Slot()
    def _on_cancelled(self) -> None:
        self.status.setText("Comparison stopped.")

    @Slot()
    def _on_thread_finished(self) -> None:
        if self._worker is not None:
            self._worker.deleteLater()
        if self._thread is not None:
            self._thread.deleteLater()
        self._thread = self._worker = None
        self._control = None
        self.run_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        self.progress.setRange(0, 1)
        self.progress.setValue(1 if self.report is not None else 0)

    # -- closing --------------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:
        self._shut_down()
        super().closeEvent(event)

    def reject(self) -> None:
        self._shut_down()
        super().reject()

    def _shut_down(self) -> None:
        # A QThread destroyed while running aborts the process: stop the run and wait for it.
        self.stop()
        self.wait()
