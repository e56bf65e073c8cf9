"""The Models dialog: every GGUF on disk with its verdicts, making drafts, Hub downloads.

It is the window's face of `models/` and behaves like `specchat models ...`: the same discovery
(broken files listed with their reason), the same header fields, the same vocabulary verdicts
(`rank_drafts`), the same memory plan (`plan_fit`), the same draft file names and the same Hub
client. Nothing here re-implements those rules.

Threads: scanning, inspecting, ranking, listing a repository, downloading and quantizing all run
on the dialog's own QThreadPool. A job gets only plain values and hands back plain (frozen) data
through a queued signal, so every widget is touched on the UI thread alone. Downloads are
cancelled through `download_file`'s cancel hook; quantizing has no hook, so it always runs to the
end (it takes seconds for a small draft). The job relay is `ui.workers.jobs`; the work the
jobs do, and the words the dialog shows, are in `ui.dialogs.model_library`.

The window owns the preferences: it passes the user's extra folders in (`extra_dirs`) and
stores them again when `foldersChanged` fires; `modelsChanged` tells it to refresh its dropdowns.
"""

# Qt signal names are camelCase, like Qt's own (foldersChanged beside clicked, finished).

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Qt, QThreadPool, Signal, Slot
from PySide6.QtGui import QCloseEvent, QColor, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.errors import Cancelled, DraftIncompatibleError
from app.paths import models_dir
from models.catalog import CATALOG, CatalogModel, CatalogPair
from models.cli import default_draft_path
from models.describe import format_params
from models.discovery import ModelEntry, discover_models
from models.hub import DownloadProgress, RemoteFile, list_gguf_files, pull
from models.memory import format_bytes
from models.quantize import FTYPES
from ui.dialogs.model_library import (
    AMBER,
    DASH,
    GREEN,
    RED,
    Details,
    Downloaded,
    MadeDraft,
    entry_status,
    inside,
    judge,
    make_draft_file,
    opt,
    remote_label,
    same_path,
    sentence,
)
from ui.workers.jobs import Jobs, Report, ThrottledProgress

__all__ = ["DRAFT_TYPES", "RED", "ModelsDialog"]

# Offered for "Make draft", smallest useful first after the usual choice. Float types are left
# out: a draft in F16/F32 is never smaller than its target, so it cannot speed anything up.
DRAFT_TYPES: tuple[str, ...] = tuple(
    t for t in ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_1", "Q4_0", "Q3_K_M", "Q2_K") if t in FTYPES
)

_PROGRESS_STEPS = 1000  # progress bar range: a QProgressBar holds an int, file sizes overflow it

MODEL_COLUMNS = (
    "Name",
    "Source",
    "Architecture",
    "Quantization",
    "Params",
    "Size",
    "Context",
    "Vocab",
    "Status",
)
DRAFT_COLUMNS = ("Draft", "Quantization", "Size", "Verdict")
CATALOG_COLUMNS = ("Pair", "Target", "Draft", "Note")


# ---------------------------------------------------------------------------------------------
# The dialog


def _table(columns: Sequence[str], name: str) -> QTableWidget:
    table = QTableWidget(0, len(columns))
    table.setObjectName(name)
    table.setHorizontalHeaderLabels(list(columns))
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.verticalHeader().setVisible(False)
    # One line per row: long paths and reasons are elided here and whole in the tooltip.
    table.setWordWrap(False)
    table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 8)
    table.horizontalHeader().setStretchLastSection(True)
    return table


def _item(text: str, color: QColor | None = None, tip: str | None = None) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    if color is not None:
        item.setForeground(color)
    item.setToolTip(tip if tip is not None else text)
    return item


class ModelsDialog(QDialog):
    """Local GGUF files with their verdicts, "Make draft", and downloads from the Hub.

    Signals:
        modelsChanged(): a file was added, made or downloaded (the window refreshes its lists).
        foldersChanged(list): the user's extra folders (list[Path]) after an add or a remove.
    """

    modelsChanged = Signal()
    foldersChanged = Signal(list)

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        extra_dirs: Sequence[Path] = (),
        n_ctx: int = 4096,
        n_gpu_layers: int = -1,
        drafts_dir: Path | None = None,
        hf_cache: Path | None = None,
        lmstudio_dirs: Sequence[Path] | None = None,
    ) -> None:
        """`drafts_dir`: where "Make draft" writes (default: the app's models folder).
        `hf_cache` / `lmstudio_dirs`: where to look besides (default: the usual places)."""
        super().__init__(parent)
        self.setObjectName("modelsDialog")
        self.setWindowTitle("Models")
        self.resize(1100, 720)

        self._extra_dirs: list[Path] = [Path(d) for d in extra_dirs]
        self._n_ctx = n_ctx
        self._n_gpu_layers = n_gpu_layers
        self._drafts_dir = drafts_dir
        self._hf_cache = hf_cache
        self._lmstudio_dirs = list(lmstudio_dirs) if lmstudio_dirs is not None else None
        self._entries: list[ModelEntry] = []
        self._scan_id = 0  # newest scan; older results are dropped
        self._details_id = 0
        self._select_after_scan: Path | None = None
        self._quantizing = False
        self._listing = False
        self._list_id = 0  # newest listing; an older answer is dropped
        self._shown_before = False
        self._download_cancel: threading.Event | None = None
        self._download_file = ""
        self._download_started = 0.0
        self._download_base = 0
        self._remote_repo = ""

        # The pool is created before the job relay, so that Qt deletes it first: its destructor
        # waits for running jobs, which may still emit through the relay.
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(4)
        self._jobs = Jobs(self._pool, self)

        self.tabs = QTabWidget()
        self.tabs.addTab(self._build_local_tab(), "Local models")
        self.tabs.addTab(self._build_download_tab(), "Download")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs)
        layout.addWidget(buttons)

        self._show_folders()
        self._update_buttons()
        self.refresh()

    # -- construction --------------------------------------------------------------------------

    def _build_local_tab(self) -> QWidget:
        tab = QWidget()
        tab.setObjectName("localTab")

        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setObjectName("refreshButton")
        self.refresh_button.clicked.connect(self.refresh)
        self.add_folder_button = QPushButton("Add folder…")
        self.add_folder_button.setObjectName("addFolderButton")
        self.add_folder_button.clicked.connect(self._choose_folder)
        self.add_file_button = QPushButton("Add file…")
        self.add_file_button.setObjectName("addFileButton")
        self.add_file_button.clicked.connect(self._choose_file)
        self.remove_folder_button = QPushButton("Remove folder")
        self.remove_folder_button.setObjectName("removeFolderButton")
        self.remove_folder_button.clicked.connect(self._remove_selected_folder)
        self.scan_label = QLabel()
        self.scan_label.setObjectName("scanLabel")
        top = QHBoxLayout()
        for widget in (
            self.refresh_button,
            self.add_folder_button,
            self.add_file_button,
            self.remove_folder_button,
        ):
            top.addWidget(widget)
        top.addStretch(1)
        top.addWidget(self.scan_label)

        self.folder_list = QListWidget()
        self.folder_list.setObjectName("folderList")
        self.folder_list.setMaximumHeight(56)
        self.folder_list.setToolTip("Folders searched besides the app's own and the usual places")
        self.folder_list.itemSelectionChanged.connect(self._update_buttons)

        self.models_table = _table(MODEL_COLUMNS, "modelsTable")
        self.models_table.itemSelectionChanged.connect(self._on_model_selected)

        self.details_table = _table(("Field", "Value"), "detailsTable")
        self.details_table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.details_table.horizontalHeader().setVisible(False)
        self.memory_label = QLabel()
        self.memory_label.setObjectName("memoryLabel")
        self.memory_label.setWordWrap(True)
        self.memory_warning_label = QLabel()
        self.memory_warning_label.setObjectName("memoryWarningLabel")
        self.memory_warning_label.setWordWrap(True)
        self.memory_warning_label.setStyleSheet(f"color: {AMBER.name()};")
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.details_table, 1)
        left_layout.addWidget(self.memory_label)
        left_layout.addWidget(self.memory_warning_label)

        self.drafts_title = QLabel("Drafts for the selected target")
        self.drafts_table = _table(DRAFT_COLUMNS, "draftsTable")
        self.draft_type_combo = QComboBox()
        self.draft_type_combo.setObjectName("draftTypeCombo")
        self.draft_type_combo.addItems(list(DRAFT_TYPES))
        self.draft_type_combo.setCurrentText("Q4_0")
        self.make_draft_button = QPushButton("Make draft")
        self.make_draft_button.setObjectName("makeDraftButton")
        self.make_draft_button.setToolTip(
            "Re-quantize the selected model into a smaller file of the same vocabulary"
        )
        self.make_draft_button.clicked.connect(self._on_make_draft_clicked)
        self.quantize_busy = QProgressBar()
        self.quantize_busy.setObjectName("quantizeBusy")
        self.quantize_busy.setRange(0, 0)  # quantize_gguf reports no progress: a busy bar
        self.quantize_busy.setMaximumWidth(120)
        self.quantize_busy.setVisible(False)
        make_row = QHBoxLayout()
        make_row.addWidget(QLabel("Type"))
        make_row.addWidget(self.draft_type_combo)
        make_row.addWidget(self.make_draft_button)
        make_row.addWidget(self.quantize_busy)
        make_row.addStretch(1)
        self.local_status_label = QLabel()
        self.local_status_label.setObjectName("localStatusLabel")
        self.local_status_label.setWordWrap(True)
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(self.drafts_title)
        right_layout.addWidget(self.drafts_table, 1)
        right_layout.addLayout(make_row)
        right_layout.addWidget(self.local_status_label)

        details = QSplitter(Qt.Orientation.Horizontal)
        details.addWidget(left)
        details.addWidget(right)
        details.setSizes([420, 680])  # the verdicts are the longer text
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.models_table)
        split.addWidget(details)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)

        layout = QVBoxLayout(tab)
        layout.addLayout(top)
        layout.addWidget(self.folder_list)
        layout.addWidget(split, 1)
        return tab

    def _build_download_tab(self) -> QWidget:
        tab = QWidget()
        tab.setObjectName("downloadTab")

        catalog_box = QGroupBox("Known target / draft pairs")
        self.catalog_table = _table(CATALOG_COLUMNS, "catalogTable")
        for pair in CATALOG:
            row = self.catalog_table.rowCount()
            self.catalog_table.insertRow(row)
            title = _item(pair.title)
            title.setData(Qt.ItemDataRole.UserRole, pair.key)
            self.catalog_table.setItem(row, 0, title)
            for col, model in ((1, pair.target), (2, pair.draft)):
                text = f"{model.label} (~{model.approx_size_gb:g} GB)"
                tip = f"{model.repo_id}, file {model.file_pattern}"
                self.catalog_table.setItem(row, col, _item(text, tip=tip))
            note = pair.note + ("" if pair.verified_offline else " (not verified offline)")
            self.catalog_table.setItem(row, 3, _item(note))
        self.catalog_table.resizeColumnsToContents()
        self.catalog_table.itemSelectionChanged.connect(self._update_buttons)
        self.catalog_buttons: dict[str, QPushButton] = {}
        catalog_row = QHBoxLayout()
        for which, text in (
            ("target", "Download target"),
            ("draft", "Download draft"),
            ("both", "Download both"),
        ):
            button = QPushButton(text)
            button.setObjectName(f"catalog{which.capitalize()}Button")
            button.clicked.connect(lambda _checked=False, w=which: self._download_catalog(w))
            self.catalog_buttons[which] = button
            catalog_row.addWidget(button)
        catalog_row.addStretch(1)
        catalog_layout = QVBoxLayout(catalog_box)
        catalog_layout.addWidget(self.catalog_table)
        catalog_layout.addLayout(catalog_row)

        repo_box = QGroupBox("Any repository on the Hub")
        self.repo_edit = QLineEdit()
        self.repo_edit.setObjectName("repoEdit")
        self.repo_edit.setPlaceholderText("owner/name, e.g. Qwen/Qwen2.5-0.5B-Instruct-GGUF")
        self.repo_edit.returnPressed.connect(self._on_list_clicked)
        self.repo_edit.textChanged.connect(self._update_buttons)
        self.list_files_button = QPushButton("List files")
        self.list_files_button.setObjectName("listFilesButton")
        self.list_files_button.clicked.connect(self._on_list_clicked)
        repo_row = QHBoxLayout()
        repo_row.addWidget(self.repo_edit, 1)
        repo_row.addWidget(self.list_files_button)
        self.remote_list = QListWidget()
        self.remote_list.setObjectName("remoteList")
        self.remote_list.itemSelectionChanged.connect(self._update_buttons)
        self.remote_list.itemDoubleClicked.connect(lambda _item: self._on_download_clicked())
        self.download_button = QPushButton("Download")
        self.download_button.setObjectName("downloadButton")
        self.download_button.clicked.connect(self._on_download_clicked)
        repo_layout = QVBoxLayout(repo_box)
        repo_layout.addLayout(repo_row)
        repo_layout.addWidget(self.remote_list, 1)
        repo_layout.addWidget(self.download_button, 0, Qt.AlignmentFlag.AlignLeft)

        self.progress_label = QLabel()
        self.progress_label.setObjectName("progressLabel")
        self.progress_bar = QProgressBar()
        self.progress_bar.setObjectName("downloadProgress")
        self.progress_bar.setRange(0, _PROGRESS_STEPS)
        self.progress_bar.setValue(0)
        self.progress_bar.setTextVisible(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("cancelDownloadButton")
        self.cancel_button.clicked.connect(self.cancel_download)
        progress_row = QHBoxLayout()
        progress_row.addWidget(self.progress_bar, 1)
        progress_row.addWidget(self.cancel_button)
        self.download_error_label = QLabel()
        self.download_error_label.setObjectName("downloadErrorLabel")
        self.download_error_label.setWordWrap(True)
        self.download_error_label.setStyleSheet(f"color: {RED.name()};")

        layout = QVBoxLayout(tab)
        layout.addWidget(catalog_box)
        layout.addWidget(repo_box, 1)
        layout.addWidget(self.progress_label)
        layout.addLayout(progress_row)
        layout.addWidget(self.download_error_label)
        return tab

    # -- public API ----------------------------------------------------------------------------

    @property
    def entries(self) -> list[ModelEntry]:
        """The files of the latest scan, broken ones included."""
        return list(self._entries)

    @property
    def extra_dirs(self) -> list[Path]:
        return list(self._extra_dirs)

    @property
    def busy(self) -> bool:
        """True while any background job (scan, details, list, download, quantize) runs."""
        return self._jobs.running > 0

    def selected_path(self) -> Path | None:
        entry = self._selected_entry()
        return entry.path if entry is not None else None

    def set_memory_settings(self, n_ctx: int, n_gpu_layers: int) -> None:
        """The window's context size and target GPU layers, for the memory estimate."""
        self._n_ctx, self._n_gpu_layers = n_ctx, n_gpu_layers
        self._on_model_selected()

    def refresh(self) -> None:
        """Scan every folder again (in the background); keeps the selection where it can."""
        if self._select_after_scan is None:
            self._select_after_scan = self.selected_path()
        self._scan_id += 1
        scan_id = self._scan_id
        dirs = list(self._extra_dirs)
        hf_cache, lmstudio = self._hf_cache, self._lmstudio_dirs

        def work(_report: Report) -> object:
            return discover_models(dirs, hf_cache=hf_cache, lmstudio=lmstudio)

        self.scan_label.setText("Scanning…")
        self._update_buttons()
        self._jobs.submit(
            work,
            lambda entries: self._on_scanned(scan_id, entries),
            lambda exc: self._on_scan_failed(scan_id, exc),
        )

    def select_model(self, path: Path) -> bool:
        """Select the row of `path`; False when it is not listed (yet)."""
        for row, entry in enumerate(self._entries):
            if same_path(entry.path, path):
                self.models_table.selectRow(row)
                return True
        return False

    def add_folder(self, folder: Path) -> None:
        """Search `folder` too (remembered through foldersChanged) and rescan."""
        folder = Path(folder).expanduser()
        if not any(same_path(folder, d) for d in self._extra_dirs):
            self._extra_dirs.append(folder)
            self._show_folders()
            self.foldersChanged.emit(self.extra_dirs)
            self.modelsChanged.emit()
        self.refresh()

    def add_file(self, path: Path) -> None:
        """Make one GGUF file visible: its folder is searched from now on (nothing is copied)."""
        path = Path(path).expanduser()
        self._select_after_scan = path
        if self._covered(path):
            self.refresh()
        else:
            self.add_folder(path.parent)

    def remove_folder(self, folder: Path) -> None:
        kept = [d for d in self._extra_dirs if not same_path(d, Path(folder))]
        if len(kept) == len(self._extra_dirs):
            return
        self._extra_dirs = kept
        self._show_folders()
        self.foldersChanged.emit(self.extra_dirs)
        self.modelsChanged.emit()
        self.refresh()

    def make_draft(self, type_name: str) -> None:
        """Re-quantize the selected model as `type_name` in the background."""
        entry = self._selected_entry()
        if entry is None or not entry.is_model or self._quantizing:
            return
        type_name = type_name.upper()
        target = entry.path
        folder = self._drafts_dir if self._drafts_dir is not None else models_dir()
        # The CLI's naming (quantization suffix replaced), in the folder this dialog writes to.
        out = folder / default_draft_path(target, type_name).name

        def work(_report: Report) -> object:
            return make_draft_file(target, out, type_name)

        self._quantizing = True
        self.quantize_busy.setVisible(True)
        self._set_local_status(f"Quantizing {target.name} to {type_name}…")
        self._update_buttons()
        self._jobs.submit(work, self._on_draft_made, self._on_draft_failed)

    def list_repo_files(self, repo_id: str) -> None:
        """List a Hub repository's GGUF files (in the background) into the file list."""
        repo_id = repo_id.strip()
        self.download_error_label.clear()
        if not repo_id:
            self.download_error_label.setText("Type a repository id such as owner/name.")
            return
        self._listing = True
        self._list_id += 1
        list_id = self._list_id
        self._remote_repo = repo_id
        self.remote_list.clear()
        self.progress_label.setText(f"Listing {repo_id}…")
        self._update_buttons()

        def work(_report: Report) -> object:
            return list_gguf_files(repo_id)

        self._jobs.submit(
            work,
            lambda files: self._on_listed(list_id, repo_id, files),
            lambda exc: self._on_list_failed(list_id, exc),
        )

    def download(self, requests: Sequence[tuple[str, str]]) -> None:
        """Download (repo id, file name or pattern) pairs one after the other, with progress."""
        if self._download_cancel is not None or not requests:
            return
        cancel = threading.Event()
        self._download_cancel = cancel
        self._download_file = ""
        self.download_error_label.clear()
        self.progress_bar.setValue(0)
        self.progress_label.setText("Starting the download…")
        self._update_buttons()
        wanted = list(requests)

        def work(report: Report) -> object:
            progress = ThrottledProgress(report)
            paths: list[Path] = []
            try:
                for repo_id, pattern in wanted:
                    # pull checks the flag per chunk; this catches a Cancel before a file starts.
                    if cancel.is_set():
                        raise Cancelled("download cancelled")
                    paths += pull(repo_id, pattern, progress=progress, cancel=cancel)
            except Exception as exc:
                # A pair's target may have landed before its draft failed: it is still listed.
                return Downloaded(tuple(paths), exc)
            return Downloaded(tuple(paths), None)

        self._jobs.submit(work, self._on_downloaded, self._on_download_failed, self._on_progress)

    def cancel_download(self) -> None:
        if self._download_cancel is not None:
            self._download_cancel.set()
            self.progress_label.setText("Cancelling…")
            self.cancel_button.setEnabled(False)

    def shutdown(self, timeout_ms: int = 30000) -> None:
        """Cancel a download and wait for the background jobs (the window calls it on exit)."""
        self.cancel_download()
        self._pool.waitForDone(timeout_ms)
        self._jobs.forget()

    # -- Qt overrides --------------------------------------------------------------------------

    def done(self, result: int) -> None:
        # Closing stops a download (the partial file is kept, the next try resumes it); a
        # quantization cannot be stopped and finishes unseen.
        self.cancel_download()
        super().done(result)

    def showEvent(self, event: QShowEvent) -> None:
        # The constructor scanned already; a reopened dialog looks again, since files may have
        # come or gone meanwhile (headers of unchanged files come from inspect's cache).
        if self._shown_before and not event.spontaneous():
            self.refresh()
        self._shown_before = True
        super().showEvent(event)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.cancel_download()
        super().closeEvent(event)

    # -- local models ------------------------------------------------------------------------

    def _covered(self, path: Path) -> bool:
        """Does a scan already reach `path` (the app's folder or an extra folder)?"""
        return any(inside(path, root) for root in [models_dir(), *self._extra_dirs])

    def _show_folders(self) -> None:
        self.folder_list.clear()
        for folder in self._extra_dirs:
            item = QListWidgetItem(str(folder))
            item.setData(Qt.ItemDataRole.UserRole, str(folder))
            self.folder_list.addItem(item)
        self.folder_list.setVisible(bool(self._extra_dirs))

    @Slot()
    def _choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(
            self, "Add a folder of GGUF models", str(Path.home())
        )
        if folder:
            self.add_folder(Path(folder))

    @Slot()
    def _choose_file(self) -> None:
        path, _filter = QFileDialog.getOpenFileName(
            self, "Add a GGUF model", str(Path.home()), "GGUF models (*.gguf);;All files (*)"
        )
        if path:
            self.add_file(Path(path))

    @Slot()
    def _remove_selected_folder(self) -> None:
        item = self.folder_list.currentItem()
        if item is not None:
            self.remove_folder(Path(str(item.data(Qt.ItemDataRole.UserRole))))

    def _on_scanned(self, scan_id: int, entries: list[ModelEntry]) -> None:
        if scan_id != self._scan_id:
            return
        keep = self._select_after_scan
        self._select_after_scan = None
        self._entries = list(entries)
        broken = sum(1 for e in entries if not e.ok)
        self.scan_label.setText(
            f"{len(entries)} files" + (f", {broken} unusable" if broken else "")
        )
        self._fill_models_table()
        if keep is None or not self.select_model(keep):
            self._on_model_selected()  # nothing selected: clears the pane, drops late details

    def _on_scan_failed(self, scan_id: int, exc: BaseException) -> None:
        # discover_models does not raise for disk content; this is a bug, said in one sentence.
        if scan_id != self._scan_id:
            return
        self.scan_label.setText("")
        self._set_local_status(sentence(exc), RED)
        self._update_buttons()

    def _fill_models_table(self) -> None:
        table = self.models_table
        table.blockSignals(True)  # rebuilding is not a selection by the user
        table.clearSelection()
        table.setRowCount(0)
        for row, entry in enumerate(self._entries):
            table.insertRow(row)
            info = entry.info
            status, color = entry_status(entry)
            name = _item(entry.display_name, tip=str(entry.path))
            name.setData(Qt.ItemDataRole.UserRole, row)
            source = entry.source + (" (read-only)" if entry.read_only else "")
            if info is None:
                cells = [source, DASH, DASH, DASH, DASH, DASH, DASH]
            else:
                cells = [
                    source,
                    info.architecture,
                    info.quantization,
                    format_params(info.parameter_count),
                    format_bytes(info.total_size_bytes),
                    opt(info.context_length),
                    f"{info.vocab_type or DASH}/{info.vocab_size}",
                ]
            table.setItem(row, 0, name)
            for col, text in enumerate(cells, start=1):
                table.setItem(row, col, _item(text))
            table.setItem(row, len(MODEL_COLUMNS) - 1, _item(status, color))
        table.resizeColumnsToContents()
        table.blockSignals(False)

    def _selected_entry(self) -> ModelEntry | None:
        rows = self.models_table.selectionModel().selectedRows()
        if not rows:
            return None
        row = rows[0].row()
        return self._entries[row] if 0 <= row < len(self._entries) else None

    @Slot()
    def _on_model_selected(self) -> None:
        entry = self._selected_entry()
        self._update_buttons()
        self._details_id += 1
        if entry is None:
            self._show_details(None)
            return
        details_id = self._details_id
        entries = list(self._entries)
        n_ctx, n_gpu_layers = self._n_ctx, self._n_gpu_layers
        self.memory_label.setText("Reading…")
        self.memory_warning_label.clear()

        def work(_report: Report) -> object:
            return judge(entry, entries, n_ctx, n_gpu_layers)

        self._jobs.submit(
            work,
            lambda details: self._on_details(details_id, details),
            lambda exc: self._on_details_failed(details_id, exc),
        )

    def _on_details(self, details_id: int, details: Details) -> None:
        if details_id == self._details_id:
            self._show_details(details)

    def _on_details_failed(self, details_id: int, exc: BaseException) -> None:
        if details_id == self._details_id:
            self._show_details(None)
            self.memory_label.setText(sentence(exc))

    def _show_details(self, details: Details | None) -> None:
        self.details_table.setRowCount(0)
        self.drafts_table.setRowCount(0)
        self.memory_label.clear()
        self.memory_warning_label.clear()
        if details is None:
            self.drafts_title.setText("Drafts for the selected target")
            return
        for row, (key, value) in enumerate(details.rows):
            self.details_table.insertRow(row)
            color = RED if key == "status" else None
            self.details_table.setItem(row, 0, _item(key))
            self.details_table.setItem(row, 1, _item(value, color))
        self.details_table.resizeColumnToContents(0)
        self.memory_label.setText(details.memory)
        self.memory_warning_label.setText("\n".join(details.warnings))
        usable = sum(1 for d in details.drafts if d.kind == "usable")
        self.drafts_title.setText(
            f"Drafts for {details.path.name}: {usable} usable of {len(details.drafts)} files"
            if details.drafts
            else "Drafts for the selected target"
        )
        colors = {"usable": GREEN, "compatible": AMBER, "refused": RED}
        for row, draft in enumerate(details.drafts):
            self.drafts_table.insertRow(row)
            name = _item(draft.name, tip=str(draft.path))
            name.setData(Qt.ItemDataRole.UserRole, str(draft.path))
            self.drafts_table.setItem(row, 0, name)
            self.drafts_table.setItem(row, 1, _item(draft.quantization))
            self.drafts_table.setItem(row, 2, _item(draft.size))
            self.drafts_table.setItem(row, 3, _item(draft.verdict, colors[draft.kind]))
        # The verdict column takes what is left; it is the one that must stay readable.
        for column in range(len(DRAFT_COLUMNS) - 1):
            self.drafts_table.resizeColumnToContents(column)
        self.drafts_table.setColumnWidth(0, min(self.drafts_table.columnWidth(0), 220))

    def _set_local_status(self, text: str, color: QColor | None = None) -> None:
        self.local_status_label.setText(text)
        self.local_status_label.setStyleSheet(f"color: {color.name()};" if color else "")

    @Slot()
    def _on_make_draft_clicked(self) -> None:
        self.make_draft(self.draft_type_combo.currentText())

    def _on_draft_made(self, made: MadeDraft) -> None:
        self._quantizing = False
        self.quantize_busy.setVisible(False)
        size = f"{format_bytes(made.size_bytes)}, {made.ratio:.0%} of the target"
        if made.compatible:
            note = "" if made.ratio < 1 else " (not smaller: it will not speed anything up)"
            self._set_local_status(
                f"Made {made.path.name} ({made.type_name}, {size}): {made.reason} with "
                f"{made.target.name}{note}.",
                GREEN if made.ratio < 1 else AMBER,
            )
        else:
            # The file is kept, as the CLI keeps it, but the user learns why it is refused.
            error = DraftIncompatibleError(made.path.name, made.target.name, made.reason)
            self._set_local_status(sentence(error), RED)
        if not self._covered(made.path):
            self._extra_dirs.append(made.path.parent)
            self._show_folders()
            self.foldersChanged.emit(self.extra_dirs)
        # Back on the target: its draft list now shows the new file with its verdict.
        self._select_after_scan = made.target
        self._update_buttons()
        self.modelsChanged.emit()
        self.refresh()

    def _on_draft_failed(self, exc: BaseException) -> None:
        self._quantizing = False
        self.quantize_busy.setVisible(False)
        self._set_local_status(sentence(exc), RED)
        self._update_buttons()

    # -- downloads -----------------------------------------------------------------------------

    def _selected_pair(self) -> CatalogPair | None:
        rows = self.catalog_table.selectionModel().selectedRows()
        if not rows:
            return None
        item = self.catalog_table.item(rows[0].row(), 0)
        key = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        return next((p for p in CATALOG if p.key == key), None)

    def _download_catalog(self, which: str) -> None:
        pair = self._selected_pair()
        if pair is None:
            return
        chosen: list[CatalogModel] = {
            "target": [pair.target],
            "draft": [pair.draft],
            "both": [pair.target, pair.draft],
        }[which]
        self.download([(m.repo_id, m.file_pattern) for m in chosen])

    @Slot()
    def _on_list_clicked(self) -> None:
        if not self._listing:
            self.list_repo_files(self.repo_edit.text())

    def _on_listed(self, list_id: int, repo_id: str, files: list[RemoteFile]) -> None:
        if list_id != self._list_id:
            return
        self._listing = False
        self.remote_list.clear()
        for f in files:
            if f.shard is not None and f.shard[0] != 1:
                continue  # a split model is one choice, offered by its first part
            item = QListWidgetItem(remote_label(f, files))
            item.setData(Qt.ItemDataRole.UserRole, f.path)
            self.remote_list.addItem(item)
        count = self.remote_list.count()
        self.progress_label.setText(
            f"{repo_id}: {count} GGUF file{'s' if count != 1 else ''}"
            if count
            else f"{repo_id} has no GGUF files."
        )
        self._update_buttons()

    def _on_list_failed(self, list_id: int, exc: BaseException) -> None:
        if list_id != self._list_id:
            return
        self._listing = False
        self.progress_label.clear()
        self.download_error_label.setText(sentence(exc))
        self._update_buttons()

    @Slot()
    def _on_download_clicked(self) -> None:
        item = self.remote_list.currentItem()
        if item is None or not self._remote_repo:
            return
        self.download([(self._remote_repo, str(item.data(Qt.ItemDataRole.UserRole)))])

    def _on_progress(self, event: object) -> None:
        if not isinstance(event, DownloadProgress) or self._download_cancel is None:
            return
        if self._download_cancel.is_set():
            return  # keep "Cancelling…" until the job ends
        now = time.monotonic()
        if event.filename != self._download_file:
            # Speed is measured per file, from where this transfer started (a resumed file's
            # earlier bytes did not come over the network now).
            self._download_file = event.filename
            self._download_started = now
            self._download_base = event.resumed_from or event.downloaded
        total = format_bytes(event.total) if event.total else "?"
        text = f"{event.filename}: {format_bytes(event.downloaded)} / {total}"
        if event.fraction is not None:
            text += f" ({event.fraction:.0%})"
        if event.phase == "checking":
            text = "Checking " + text
        else:
            elapsed = now - self._download_started
            if elapsed > 0 and event.downloaded > self._download_base:
                speed = (event.downloaded - self._download_base) / elapsed
                text += f" · {format_bytes(speed)}/s"
        self.progress_label.setText(text)
        if event.fraction is not None:
            self.progress_bar.setRange(0, _PROGRESS_STEPS)
            self.progress_bar.setValue(round(event.fraction * _PROGRESS_STEPS))
        else:
            self.progress_bar.setRange(0, 0)  # no size known: busy

    def _end_download(self) -> None:
        self._download_cancel = None
        self._download_file = ""
        if self.progress_bar.maximum() == 0:
            self.progress_bar.setRange(0, _PROGRESS_STEPS)
        self._update_buttons()

    def _on_downloaded(self, outcome: Downloaded) -> None:
        paths = list(outcome.paths)
        if outcome.error is None:
            self._end_download()
            self.progress_bar.setValue(_PROGRESS_STEPS)
            size = sum(p.stat().st_size for p in paths if p.exists())
            names = ", ".join(p.name for p in paths)
            self.progress_label.setText(
                f"Downloaded {names} ({format_bytes(size)}) to {paths[0].parent}."
                if paths
                else "Nothing to download."
            )
        else:
            self._on_download_failed(outcome.error)
        if paths:
            self._select_after_scan = paths[0]
            self.modelsChanged.emit()
            self.refresh()

    def _on_download_failed(self, exc: BaseException) -> None:
        self._end_download()
        if isinstance(exc, Cancelled):
            # The user's choice, not an error: a plain status, and the bar back at zero.
            self.progress_bar.setValue(0)
            self.progress_label.setText("Download cancelled; starting it again resumes it.")
            return
        self.progress_label.clear()
        self.download_error_label.setText(sentence(exc))

    # -- buttons ---------------------------------------------------------------------------------

    def _update_buttons(self) -> None:
        entry = self._selected_entry()
        self.make_draft_button.setEnabled(
            entry is not None and entry.is_model and not self._quantizing
        )
        self.remove_folder_button.setEnabled(self.folder_list.currentItem() is not None)
        downloading = self._download_cancel is not None
        pair_chosen = bool(self.catalog_table.selectionModel().selectedRows())
        for button in self.catalog_buttons.values():
            button.setEnabled(pair_chosen and not downloading)
        self.list_files_button.setEnabled(bool(self.repo_edit.text().strip()) and not self._listing)
        self.download_button.setEnabled(
            self.remote_list.currentItem() is not None and not downloading
        )
        self.cancel_button.setEnabled(downloading and not self._download_cancel_set())

    def _download_cancel_set(self) -> bool:
        return self._download_cancel is not None and self._download_cancel.is_set()
