"""The Compare dialog: plain decoding against each draft and γ on one prompt, as a table and chart.

The comparison runs off the UI thread (a comparison takes seconds to minutes and the UI thread
must keep painting): on the window's engine thread (ui/window/compare.py), or on a thread of
its own for a plain benchmark callable (app.bench.BenchCallable). Its progress, each draft's
rows and its end arrive as events (ui/workers/compare_run.py), turned into queued signals here.
Stop sets the control's flag, which the engine reads between rounds. "Use this draft" hands a
row's draft file to whoever listens to `draftChosen` (the window loads it as its draft).
"""

# Qt signal names are camelCase, like Qt's own (reportReady beside clicked, finished).

from __future__ import annotations

from pathlib import Path
from typing import cast

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QSplitter,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.bench.chart import draw_speedup_chart
from app.bench.session import BenchCallable
from app.bench.summary import BenchReport, ConfigReport
from app.engine.control import GenerationControl
from app.errors import Cancelled
from ui.dialogs.compare_rows import COLUMN_TIPS, COLUMNS, row_texts, unmeasured_text, verdict
from ui.dialogs.tables import make_table
from ui.messages import describe, is_cancel
from ui.named_widgets import push_button
from ui.workers.compare_run import CompareListener, CompareRun, CompareSource, ThreadCompare


class CompareDialog(QDialog):
    """Write a prompt, press Compare, read the table and the speedup chart.

    Signals:
        reportReady(BenchReport): the finished comparison, for whoever wants to keep it.
        draftChosen(str): the draft file of the row the user chose with "Use this draft".
    """

    reportReady = Signal(object)
    draftChosen = Signal(str)
    # The comparison's events, emitted on the thread that runs it, handled on the dialog's.
    _progressed = Signal(object)
    _finished = Signal(object)
    _failed = Signal(object)

    def __init__(
        self,
        run_bench: BenchCallable | CompareSource,
        parent: QWidget | None = None,
        prompt: str = "",
    ) -> None:
        super().__init__(parent)
        self.setObjectName("compareDialog")
        self.setWindowTitle("Compare drafts and draft lengths")
        self._source = (
            run_bench if isinstance(run_bench, CompareSource) else ThreadCompare(run_bench)
        )
        self._run: CompareRun | None = None
        self._loading_draft: str | None = None  # asked for by "Use this draft", not loaded yet
        queued = Qt.ConnectionType.QueuedConnection
        self._progressed.connect(self._on_progress, queued)
        self._finished.connect(self._on_finished, queued)
        self._failed.connect(self._on_failed, queued)
        self.report: BenchReport | None = None
        self._rows: list[ConfigReport] = []
        # The last (done, total) the running comparison reported: where a Stop leaves the bar.
        self._reached: tuple[int, int] | None = None

        self.prompt = QPlainTextEdit(prompt)
        self.prompt.setObjectName("comparePrompt")
        self.prompt.setPlaceholderText("A prompt to run with plain decoding and every draft…")
        self.prompt.setMaximumHeight(90)
        # Tab moves on to Compare, as in the main window's message box: a tab typed here
        # would trap the keyboard in the box the dialog opens on.
        self.prompt.setTabChangesFocus(True)
        # Neither the prompt nor the table has a caption to be named by.
        self.prompt.setAccessibleName("Prompt to compare on")
        self.run_button = push_button("Compare", "compareRunButton")
        self.stop_button = push_button("Stop", "compareStopButton")
        self.stop_button.setEnabled(False)
        self.use_button = push_button(
            "Use this draft",
            "compareUseDraftButton",
            "Load the selected row's draft as the chat's draft",
        )
        self.use_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setObjectName("compareProgress")
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.status = QLabel(
            "Runs are interleaved and start from cold caches, apart from your past chats."
        )
        self.status.setObjectName("compareStatus")
        self.status.setWordWrap(True)

        # Figures take the width they need; the configuration name takes what is left (elided,
        # whole in its tooltip), so every column, TTFT included, shows without scrolling.
        self.table = make_table(
            COLUMNS, "compareTable", stretch=(0,), fit=tuple(range(1, len(COLUMNS)))
        )
        for column, name in enumerate(COLUMNS):
            header = self.table.horizontalHeaderItem(column)
            if header is not None and name in COLUMN_TIPS:
                header.setToolTip(COLUMN_TIPS[name])
        self.table.horizontalHeader().setMinimumSectionSize(40)
        self.table.setAccessibleName("Comparison results")
        self.table.itemSelectionChanged.connect(self._update_use_button)
        self.table.itemDoubleClicked.connect(lambda _item: self.use_selected_draft())

        # matplotlib picks the Qt binding already imported (PySide6) for its Qt canvas.
        from matplotlib.backends.backend_qtagg import FigureCanvasQTAgg  # noqa: PLC0415
        from matplotlib.figure import Figure  # noqa: PLC0415

        self.figure = Figure(figsize=(6.0, 3.2), dpi=100)
        self.canvas = FigureCanvasQTAgg(self.figure)  # type: ignore[no-untyped-call]
        self.canvas.setObjectName("compareChart")
        self.canvas.setMinimumHeight(220)
        # The chart is laid out for the figure's size when drawn; the canvas then takes the
        # dialog's size, so it is laid out again on every resize (or the axis label is clipped).
        self.canvas.mpl_connect("resize_event", self._relayout_chart)

        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.progress, 1)
        buttons.addWidget(self.use_button)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.table)
        splitter.addWidget(self.canvas)
        layout = QVBoxLayout(self)
        layout.addWidget(self.prompt)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        layout.addWidget(splitter, 1)
        self.resize(900, 640)

        self.run_button.clicked.connect(self.start)
        self.stop_button.clicked.connect(self.stop)
        self.use_button.clicked.connect(self.use_selected_draft)

    @property
    def running(self) -> bool:
        return self._run is not None

    def start(self) -> None:
        if self.running:
            return
        # Nothing of the previous run may pass for this one's, nor be chosen with "Use this
        # draft" while this one runs or after it stops.
        self._show_nothing()
        # Progress and each draft's finished figures travel the same queued path.
        listener = CompareListener(
            progress=lambda done, total, text: self._progressed.emit((done, total, text)),
            partial=self._progressed.emit,
            finished=self._finished.emit,
            failed=self._failed.emit,
        )
        self._run = self._source.start(self.prompt.toPlainText(), GenerationControl(), listener)
        self.run_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self._update_use_button()
        self.progress.setRange(0, 0)  # busy until the first progress report gives a total
        self.status.setText("Loading models…")

    def stop(self) -> None:
        if self._run is None:
            return
        if self._run.stop():  # it had not started: it ends now
            self._failed.emit(Cancelled("the comparison was stopped before it started"))
        self.status.setText("Stopping after the current round…")

    def wait(self, timeout_ms: int = 60_000) -> bool:
        """Block until the comparison has ended (tests, and closing the dialog)."""
        return self._run is None or self._run.wait(timeout_ms)

    def selected_draft(self) -> str | None:
        """The draft file of the selected row; None for plain decoding, no selection, or a row
        not measured (its draft may not even load)."""
        rows = self.table.selectionModel().selectedRows()
        if not rows or not 0 <= rows[0].row() < len(self._rows):
            return None
        row = self._rows[rows[0].row()]
        return row.draft_path if row.measured else None

    def use_selected_draft(self) -> None:
        path = self.selected_draft()
        if path is None or self.running:
            return
        self.status.setText(f"Loading {Path(path).name} as the chat's draft.")
        self._loading_draft = path
        self.draftChosen.emit(path)

    def chat_draft_loaded(self, draft: str) -> None:
        """The window's models loaded, `draft` (a path, or how the settings name no file) as
        the chat's draft: what the status said was loading has loaded, or has not."""
        asked, self._loading_draft = self._loading_draft, None
        if asked is None:
            return
        name = Path(asked).name
        if draft == asked:
            self.status.setText(f"{name} is the chat's draft now.")
        else:
            self.status.setText(f"{name} could not be loaded; the chat keeps its draft.")

    # -- results --------------------------------------------------------------------------------

    def show_report(self, report: BenchReport) -> None:
        self.report = report
        self._rows = [report.plain, *report.configs]
        self.table.clearSpans()
        self.table.setRowCount(len(self._rows))
        greedy = bool(report.settings.get("greedy"))
        for r, config in enumerate(self._rows):
            unmeasured = unmeasured_text(config)
            if unmeasured is not None:
                self._show_unmeasured(r, config, unmeasured)
                continue
            for c, text in enumerate(row_texts(config, greedy)):
                item = QTableWidgetItem(text)
                if c > 0:
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
                tips = [config.draft_path or text] if c == 0 else []
                item.setToolTip("\n".join([*tips, *config.notices]))
                self.table.setItem(r, c, item)
        draw_speedup_chart(report, self.figure)
        self.canvas.draw_idle()  # type: ignore[no-untyped-call]
        self._update_use_button()

    def _show_unmeasured(self, row: int, config: ConfigReport, text: str) -> None:
        # One cell across the figures' columns: a row of dashes would not say why, and an
        # error's sentence would widen whichever column held it.
        name = QTableWidgetItem(config.label)
        name.setToolTip(config.draft_path or config.label)
        self.table.setItem(row, 0, name)
        self.table.setSpan(row, 1, 1, len(COLUMNS) - 1)
        item = QTableWidgetItem(text)
        item.setToolTip(text)
        self.table.setItem(row, 1, item)

    def _show_nothing(self) -> None:
        self.report = None
        self._rows = []
        self._reached = None
        self.table.clearSpans()
        self.table.setRowCount(0)
        self.figure.clear()
        self.canvas.draw_idle()  # type: ignore[no-untyped-call]

    def _relayout_chart(self, _event: object) -> None:
        if self.figure.axes:
            self.figure.tight_layout()

    def _update_use_button(self) -> None:
        self.use_button.setEnabled(not self.running and self.selected_draft() is not None)

    def _on_progress(self, value: object) -> None:
        if isinstance(value, BenchReport):  # the drafts measured so far: their rows fill in
            self.show_report(value)
            return
        done, total, message = cast(tuple[int, int, str], value)
        self._reached = (done, total)
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)
        self.status.setText(f"Run {min(done + 1, total)} of {total}: {message}")

    def _on_finished(self, report: BenchReport) -> None:
        self.show_report(report)
        self._end_run(complete=True)
        self.status.setText(verdict(report))
        self.reportReady.emit(report)

    def _on_failed(self, exc: Exception) -> None:
        self._end_run(complete=False)
        self.status.setText("Comparison stopped." if is_cancel(exc) else describe(exc))

    def _end_run(self, *, complete: bool) -> None:
        self._run = None
        self.run_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        # A stopped or failed run leaves the bar at the runs it made, not full. Progress is
        # reported before each run, so the rows shown may count one more than it last said.
        done, total = (1, 1) if complete else (self._reached or (0, 1))
        if not complete and self.report is not None:
            done = min(max(done, len(self.report.runs)), total)
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)
        self._update_use_button()

    # -- closing --------------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:
        self._shut_down()
        super().closeEvent(event)

    def reject(self) -> None:
        self._shut_down()
        super().reject()

    def _shut_down(self) -> None:
        # The benchmark holds the engine thread: stop it and wait, so nothing outlives the dialog.
        self.stop()
        self.wait()
