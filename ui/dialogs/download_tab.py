"""The Models dialog's Download tab: known target/draft pairs and any Hub repository's files.

The same Hub client as `specchat models pull` (listing, split models as one choice, resumable
downloads), run as background jobs (ui.workers.jobs) with throttled progress. Cancel sets the
job's flag, which the download checks per chunk; the partial file stays hidden for a resume.
`downloaded(list[Path])` names the files that landed, first part of a split model first.
"""

# Qt signal names are camelCase, like Qt's own (downloaded beside clicked, finished).

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.errors import Cancelled
from models.catalog import CATALOG, CatalogModel, CatalogPair
from models.hub import DownloadProgress, RemoteFile, list_gguf_files, pull
from models.memory import format_bytes
from ui.dialogs.model_library import Downloaded, remote_label
from ui.dialogs.tables import make_item, make_table
from ui.messages import describe, is_cancel
from ui.named_widgets import named_label, push_button
from ui.status_text import show_status
from ui.themes import Status
from ui.workers.jobs import Job, Jobs, ThrottledProgress

CATALOG_COLUMNS = ("Pair", "Target", "Draft", "Note")
_PROGRESS_STEPS = 1000  # progress bar range: a QProgressBar holds an int, file sizes overflow it


class DownloadTab(QWidget):
    downloaded = Signal(list)

    def __init__(self, jobs: Jobs) -> None:
        super().__init__()
        self.setObjectName("downloadTab")
        self._jobs = jobs
        self._listing = False
        self._list_id = 0  # newest listing; an older answer is dropped
        self._remote_repo = ""
        self._download: Job | None = None
        self._download_file = ""
        self._download_started = 0.0
        self._download_base = 0

        catalog_box = QGroupBox("Known target / draft pairs")
        self.catalog_table = make_table(CATALOG_COLUMNS, "catalogTable", stretch=(3,), fit=(0,))
        self.catalog_table.setAccessibleName("Known target and draft pairs")
        for pair in CATALOG:
            row = self.catalog_table.rowCount()
            self.catalog_table.insertRow(row)
            title = make_item(pair.title)
            title.setData(Qt.ItemDataRole.UserRole, pair.key)
            self.catalog_table.setItem(row, 0, title)
            for col, model in ((1, pair.target), (2, pair.draft)):
                text = f"{model.label} (~{model.approx_size_gb:g} GB)"
                tip = f"{model.repo_id}, file {model.file_pattern}"
                self.catalog_table.setItem(row, col, make_item(text, tip=tip))
            note = pair.note + ("" if pair.verified_offline else " (not verified offline)")
            self.catalog_table.setItem(row, 3, make_item(note))
        self.catalog_table.resizeColumnsToContents()
        self.catalog_table.itemSelectionChanged.connect(self._update_buttons)
        self.catalog_buttons: dict[str, QPushButton] = {}
        catalog_row = QHBoxLayout()
        for which, text in (
            ("target", "Download target"),
            ("draft", "Download draft"),
            ("both", "Download both"),
        ):
            button = push_button(text, f"catalog{which.capitalize()}Button")
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
        # Unnamed, the field and the file list would both be read as the group's title.
        self.repo_edit.setAccessibleName("Repository")
        self.repo_edit.setPlaceholderText("owner/name, e.g. Qwen/Qwen2.5-0.5B-Instruct-GGUF")
        self.repo_edit.returnPressed.connect(self._on_list_clicked)
        self.repo_edit.textChanged.connect(self._update_buttons)
        self.list_files_button = push_button("List files", "listFilesButton")
        self.list_files_button.clicked.connect(self._on_list_clicked)
        repo_row = QHBoxLayout()
        repo_row.addWidget(self.repo_edit, 1)
        repo_row.addWidget(self.list_files_button)
        self.remote_list = QListWidget()
        self.remote_list.setObjectName("remoteList")
        self.remote_list.setAccessibleName("Files in the repository")
        self.remote_list.itemSelectionChanged.connect(self._update_buttons)
        self.remote_list.itemDoubleClicked.connect(lambda _item: self._on_download_clicked())
        self.download_button = push_button("Download", "downloadButton")
        self.download_button.clicked.connect(self._on_download_clicked)
        repo_layout = QVBoxLayout(repo_box)
        repo_layout.addLayout(repo_row)
        repo_layout.addWidget(self.remote_list, 1)
        repo_layout.addWidget(self.download_button, 0, Qt.AlignmentFlag.AlignLeft)

        self.progress_label = named_label("progressLabel")
        self.progress_bar = QProgressBar()
        self.progress_bar.setObjectName("downloadProgress")
        self.progress_bar.setRange(0, _PROGRESS_STEPS)
        self.progress_bar.setValue(0)
        self.progress_bar.setTextVisible(False)
        self.cancel_button = push_button("Cancel", "cancelDownloadButton")
        self.cancel_button.clicked.connect(self.cancel_download)
        progress_row = QHBoxLayout()
        progress_row.addWidget(self.progress_bar, 1)
        progress_row.addWidget(self.cancel_button)
        self.download_error_label = named_label("downloadErrorLabel", wrap=True)
        show_status(self.download_error_label, Status.ERROR)

        layout = QVBoxLayout(self)
        layout.addWidget(catalog_box)
        layout.addWidget(repo_box, 1)
        layout.addWidget(self.progress_label)
        layout.addLayout(progress_row)
        layout.addWidget(self.download_error_label)
        self._update_buttons()

    # -- public API ----------------------------------------------------------------------------

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
        self._jobs.run(
            lambda: list_gguf_files(repo_id),
            lambda files: self._on_listed(list_id, repo_id, files),
            lambda exc: self._on_list_failed(list_id, exc),
        )

    def download(self, requests: Sequence[tuple[str, str]]) -> None:
        """Download (repo id, file name or pattern) pairs one after the other, with progress."""
        if self._download is not None or not requests:
            return
        self._download_file = ""
        self.download_error_label.clear()
        self.progress_bar.setValue(0)
        self.progress_label.setText("Starting the download…")
        wanted = list(requests)

        def work(job: Job) -> object:
            progress = ThrottledProgress(job.report)
            paths: list[Path] = []
            try:
                for repo_id, pattern in wanted:
                    # pull checks the flag per chunk; this catches a Cancel before a file starts.
                    if job.cancelled:
                        raise Cancelled("download cancelled")
                    paths += pull(repo_id, pattern, progress=progress, cancel=job.cancel_event)
            except Exception as exc:
                # A pair's target may have landed before its draft failed: it is still listed.
                return Downloaded(tuple(paths), exc)
            return Downloaded(tuple(paths), None)

        self._download = self._jobs.submit(
            work, self._on_downloaded, self._on_download_failed, self._on_progress
        )
        self._update_buttons()

    def cancel_download(self) -> None:
        if self._download is not None:
            # The flag alone, not Jobs.cancel: the job's answer still comes, to say "cancelled".
            self._download.cancel_event.set()
            self.progress_label.setText("Cancelling…")
            self._update_buttons()

    # -- listing -------------------------------------------------------------------------------

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

    def _on_list_failed(self, list_id: int, exc: Exception) -> None:
        if list_id != self._list_id:
            return
        self._listing = False
        self.progress_label.clear()
        self.download_error_label.setText(describe(exc))
        self._update_buttons()

    # -- downloading ---------------------------------------------------------------------------

    @Slot()
    def _on_download_clicked(self) -> None:
        item = self.remote_list.currentItem()
        if item is None or not self._remote_repo:
            return
        self.download([(self._remote_repo, str(item.data(Qt.ItemDataRole.UserRole)))])

    def _on_progress(self, event: object) -> None:
        if not isinstance(event, DownloadProgress) or self._download is None:
            return
        if self._download.cancelled:
            return  # keep "Cancelling…" until the job ends
        now = time.monotonic()
        if event.phase == "checking":
            # Hashing a resumed file's partial, at disk speed: the transfer starts after it.
            self._download_file = ""
        elif event.filename != self._download_file:
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
        self._download = None
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
            self.downloaded.emit(paths)

    def _on_download_failed(self, exc: BaseException) -> None:
        self._end_download()
        if is_cancel(exc):
            # The user's choice, not an error: a plain status, and the bar back at zero.
            self.progress_bar.setValue(0)
            self.progress_label.setText("Download cancelled; starting it again resumes it.")
            return
        self.progress_label.clear()
        self.download_error_label.setText(describe(exc))

    def _update_buttons(self) -> None:
        downloading = self._download is not None
        pair_chosen = bool(self.catalog_table.selectionModel().selectedRows())
        for button in self.catalog_buttons.values():
            button.setEnabled(pair_chosen and not downloading)
        self.list_files_button.setEnabled(bool(self.repo_edit.text().strip()) and not self._listing)
        self.download_button.setEnabled(
            self.remote_list.currentItem() is not None and not downloading
        )
        self.cancel_button.setEnabled(downloading and not self._download_cancelled())

    def _download_cancelled(self) -> bool:
        return self._download is not None and self._download.cancelled
