"""The Models dialog's Local models tab: every GGUF on disk, its verdicts, and "Make draft".

It behaves like `specchat models list / inspect / make-draft` (the same discovery, header fields,
verdicts, memory plan and draft names). Scanning, judging and quantizing run as background jobs
that take plain values and hand back frozen data (ui.dialogs.model_library); quantizing cannot be
cancelled (seconds for a small draft). The window's loaded models are marked ("In use") and the
target is selected on the first scan (else the first row): the details are never blank on opening.
"""

# Qt signal names are camelCase, like Qt's own (foldersChanged beside clicked, finished).

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QFileDialog, QListWidgetItem

from app.paths import models_dir, same_file
from models.cli import default_draft_path
from models.discovery import ModelEntry, discover_models, scan_summary
from ui.dialogs.local_models_layout import LocalModelsLayout
from ui.dialogs.model_library import (
    Details,
    MadeDraft,
    entry_cells,
    entry_status,
    inside,
    judge,
    made_draft_status,
    make_draft_file,
)
from ui.dialogs.tables import make_item
from ui.messages import describe
from ui.status_text import show_status
from ui.themes import Status
from ui.workers.jobs import Job, Jobs


class LocalModelsOptions(TypedDict, total=False):
    """LocalModelsTab's keyword arguments, as the Models dialog takes them to pass on."""

    extra_dirs: Sequence[Path]
    n_ctx: int
    n_gpu_layers: int
    drafts_dir: Path | None
    hf_cache: Path | None
    lmstudio_dirs: Sequence[Path] | None


class LocalModelsTab(LocalModelsLayout):
    """Signals: modelsChanged() when a file was added or made; foldersChanged(list[Path])."""

    modelsChanged = Signal()
    foldersChanged = Signal(list)

    def __init__(
        self,
        jobs: Jobs,
        *,
        extra_dirs: Sequence[Path] = (),
        n_ctx: int = 4096,
        n_gpu_layers: int = -1,
        drafts_dir: Path | None = None,
        hf_cache: Path | None = None,
        lmstudio_dirs: Sequence[Path] | None = None,
    ) -> None:
        super().__init__()
        self._jobs = jobs
        self._extra_dirs: list[Path] = [Path(d) for d in extra_dirs]
        self._n_ctx, self._n_gpu_layers = n_ctx, n_gpu_layers
        self._drafts_dir = drafts_dir
        self._hf_cache = hf_cache
        self._lmstudio_dirs = list(lmstudio_dirs) if lmstudio_dirs is not None else None
        self._entries: list[ModelEntry] = []
        self._scan_id = 0  # newest scan; older results are dropped
        self._details_id = 0
        self._select_after_scan: Path | None = None
        self._scanned_once = False
        self._quantizing = False
        self._loaded_target: Path | None = None
        self._loaded_draft: Path | None = None

        self.refresh_button.clicked.connect(self.refresh)
        self.add_folder_button.clicked.connect(self._choose_folder)
        self.add_file_button.clicked.connect(self._choose_file)
        self.remove_folder_button.clicked.connect(self._remove_selected_folder)
        self.folder_list.itemSelectionChanged.connect(self._update_buttons)
        self.models_table.itemSelectionChanged.connect(self._on_model_selected)
        self.make_draft_button.clicked.connect(
            lambda: self.make_draft(self.draft_type_combo.currentText())
        )

        self._show_folders()
        self._update_buttons()

    # -- public API ----------------------------------------------------------------------------

    @property
    def entries(self) -> list[ModelEntry]:
        """The files of the latest scan, broken ones included, and the folders it could not
        read (`is_folder`)."""
        return list(self._entries)

    @property
    def extra_dirs(self) -> list[Path]:
        return list(self._extra_dirs)

    def selected_path(self) -> Path | None:
        entry = self._selected_entry()
        return entry.path if entry is not None else None

    def set_memory_settings(self, n_ctx: int, n_gpu_layers: int) -> None:
        """The window's context size and target GPU layers, for the memory estimate."""
        self._n_ctx, self._n_gpu_layers = n_ctx, n_gpu_layers
        self._on_model_selected()

    def set_loaded(self, target: Path | None, draft: Path | None) -> None:
        """The files the window has loaded: marked in the lists, the target selected first."""
        self._loaded_target, self._loaded_draft = target, draft
        self.details.loaded_draft = draft
        self._fill_models_table(keep_selection=True)
        self._on_model_selected()

    def refresh(self) -> None:
        """Scan every folder again (in the background); keeps the selection where it can."""
        if self._select_after_scan is None:
            self._select_after_scan = self.selected_path()
        self._scan_id += 1
        scan_id = self._scan_id
        dirs = list(self._extra_dirs)
        hf_cache, lmstudio = self._hf_cache, self._lmstudio_dirs

        def work(_job: Job) -> object:
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
            if same_file(entry.path, path):
                self.models_table.selectRow(row)
                return True
        return False

    def add_folder(self, folder: Path) -> None:
        """Search `folder` too (remembered through foldersChanged) and rescan."""
        folder = Path(folder).expanduser()
        if not any(same_file(folder, d) for d in self._extra_dirs):
            self._extra_dirs.append(folder)
            self._folders_changed()
        self.refresh()

    def add_file(self, path: Path) -> None:
        """Make one GGUF file visible, that file alone (nothing is copied, the rest of its
        folder stays out: Add folder… is for a whole folder)."""
        path = Path(path).expanduser()
        self._select_after_scan = path
        if self._covered(path):
            self.refresh()
        else:
            self.add_folder(path)

    def remove_folder(self, folder: Path) -> None:
        kept = [d for d in self._extra_dirs if not same_file(d, Path(folder))]
        if len(kept) == len(self._extra_dirs):
            return
        self._extra_dirs = kept
        self._folders_changed()
        self.refresh()

    def _folders_changed(self) -> None:
        """The searched folders were edited: list them, have the window remember them, and
        let it know the models on offer may differ."""
        self._show_folders()
        self.foldersChanged.emit(self.extra_dirs)
        self.modelsChanged.emit()

    def show_landed(self, path: Path) -> None:
        """A file arrived (a download): list it and select it."""
        self._select_after_scan = path
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
        out = default_draft_path(target, type_name, folder)

        def work(_job: Job) -> object:
            return make_draft_file(target, out, type_name)

        self._quantizing = True
        self.quantize_busy.setVisible(True)
        self._set_status(f"Quantizing {target.name} to {type_name}…")
        self._update_buttons()
        self._jobs.submit(work, self._on_draft_made, self._on_draft_failed)

    # -- folders -------------------------------------------------------------------------------

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

    # -- the list ------------------------------------------------------------------------------

    def _on_scanned(self, scan_id: int, entries: list[ModelEntry]) -> None:
        if scan_id != self._scan_id:
            return
        keep = self._select_after_scan
        self._select_after_scan = None
        self._entries = list(entries)
        self.scan_label.setText(scan_summary(entries))
        self._fill_models_table(keep_selection=False)
        first_scan, self._scanned_once = not self._scanned_once, True
        if keep is not None and self.select_model(keep):
            return
        # Never a blank half on opening: the loaded target, else the first file.
        if first_scan and self._entries:
            loaded = self._loaded_target
            if loaded is None or not self.select_model(loaded):
                self.models_table.selectRow(0)
            return
        self._on_model_selected()  # nothing selected: clears the pane, drops late details

    def _on_scan_failed(self, scan_id: int, exc: Exception) -> None:
        # discover_models does not raise for disk content; this is a bug, said in one sentence.
        if scan_id != self._scan_id:
            return
        self.scan_label.setText("")
        self._set_status(describe(exc), Status.ERROR)
        self._update_buttons()

    def _in_use(self, path: Path) -> str:
        if self._loaded_target is not None and same_file(path, self._loaded_target):
            return "target"
        if self._loaded_draft is not None and same_file(path, self._loaded_draft):
            return "draft"
        return ""

    def _fill_models_table(self, *, keep_selection: bool) -> None:
        table = self.models_table
        selected = self.selected_path() if keep_selection else None
        table.blockSignals(True)  # rebuilding is not a selection by the user
        table.clearSelection()
        table.setRowCount(0)
        bold = QFont(table.font())
        bold.setBold(True)
        for row, entry in enumerate(self._entries):
            table.insertRow(row)
            status, kind = entry_status(entry)
            in_use = self._in_use(entry.path)
            name = make_item(entry.display_name, tip=str(entry.path))
            cells = [in_use, *entry_cells(entry)]
            items = [name, *(make_item(text) for text in cells), make_item(status, kind)]
            for col, item in enumerate(items):
                if in_use:
                    item.setFont(bold)
                table.setItem(row, col, item)
        if selected is not None:
            self.select_model(selected)
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
            self.details.show_details(None)
            return
        details_id = self._details_id
        entries = list(self._entries)
        n_ctx, n_gpu_layers = self._n_ctx, self._n_gpu_layers
        self.details.reading()

        def work(_job: Job) -> object:
            return judge(entry, entries, n_ctx, n_gpu_layers)

        self._jobs.submit(
            work,
            lambda details: self._on_details(details_id, details),
            lambda exc: self._on_details_failed(details_id, exc),
        )

    def _on_details(self, details_id: int, details: Details) -> None:
        if details_id == self._details_id:
            self.details.show_details(details)

    def _on_details_failed(self, details_id: int, exc: Exception) -> None:
        if details_id == self._details_id:
            self.details.failed(describe(exc))

    # -- making drafts -------------------------------------------------------------------------

    def _set_status(self, text: str, status: Status | None = None) -> None:
        self.local_status_label.setText(text)
        show_status(self.local_status_label, status)

    def _on_draft_made(self, made: MadeDraft) -> None:
        self._quantizing = False
        self.quantize_busy.setVisible(False)
        self._set_status(*made_draft_status(made))
        if not self._covered(made.path):
            self._extra_dirs.append(made.path.parent)
            self._show_folders()
            self.foldersChanged.emit(self.extra_dirs)
        # Back on the target: its draft list now shows the new file with its verdict.
        self._select_after_scan = made.target
        self._update_buttons()
        self.modelsChanged.emit()
        self.refresh()

    def _on_draft_failed(self, exc: Exception) -> None:
        self._quantizing = False
        self.quantize_busy.setVisible(False)
        self._set_status(describe(exc), Status.ERROR)
        self._update_buttons()

    def _update_buttons(self) -> None:
        entry = self._selected_entry()
        self.make_draft_button.setEnabled(
            entry is not None and entry.is_model and not self._quantizing
        )
        self.remove_folder_button.setEnabled(self.folder_list.currentItem() is not None)
