"""The Models dialog on real files: the demo family, a Gemma file of another vocabulary, broken
files, a real quantization and real downloads from the local fake Hub (tests/helpers/fake_hub)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QTableWidget, QTableWidgetItem
from pytestqt.qtbot import QtBot

from app.errors import EMPTY_FILE, NOT_GGUF
from app.paths import models_dir
from tests.helpers.fake_hub import FakeFile, FakeHub
from tests.helpers.model_files import write_broken_files, write_tiny_gguf
from ui.dialogs.models_dialog import ModelsDialog
from ui.themes import Status, status_color

REPO = "acme/Tiny-GGUF"
WAIT_MS = 30_000

DialogFactory = Callable[..., ModelsDialog]


def _item(table: QTableWidget, row: int, column: int) -> QTableWidgetItem:
    item = table.item(row, column)
    assert item is not None, (row, column)
    return item


def _headers(table: QTableWidget) -> list[str]:
    items = [table.horizontalHeaderItem(c) for c in range(table.columnCount())]
    return [item.text() if item is not None else "" for item in items]


def _column(table: QTableWidget, title: str) -> int:
    return _headers(table).index(title)


def _rows(table: QTableWidget) -> dict[str, dict[str, str]]:
    """Row cells by the first column's text, keyed by column title."""
    headers = _headers(table)
    out: dict[str, dict[str, str]] = {}
    for row in range(table.rowCount()):
        cells = {h: _item(table, row, c).text() for c, h in enumerate(headers)}
        out[cells[headers[0]]] = cells
    return out


def _row_of(table: QTableWidget, name: str) -> int:
    return next(r for r in range(table.rowCount()) if _item(table, r, 0).text() == name)


def _details(dialog: ModelsDialog) -> dict[str, str]:
    table = dialog.local.details.details_table
    return {_item(table, r, 0).text(): _item(table, r, 1).text() for r in range(table.rowCount())}


@pytest.fixture()
def library(tmp_path: Path, demo_models: Any, gemma_model: Path) -> Path:
    """A user folder: three demo files and Gemma (links to the cached files), and broken files."""
    folder = tmp_path / "library"
    folder.mkdir()
    for source in (demo_models.f32, demo_models.q4_1, demo_models.q8_0, gemma_model):
        (folder / source.name).symlink_to(source)
    broken = write_broken_files(folder / "broken")
    for name in ("notes.gguf", "cut-data.gguf", "future.gguf"):
        broken[name][0].unlink()  # empty, random bytes and a cut header are enough here
    return folder


@pytest.fixture()
def make_dialog(qtbot: QtBot, tmp_path: Path) -> Iterator[DialogFactory]:
    """Dialogs that see only the given folders and the test's own models folder."""
    made: list[ModelsDialog] = []

    def make(**kwargs: Any) -> ModelsDialog:
        kwargs.setdefault("hf_cache", tmp_path / "no-hf-cache")
        kwargs.setdefault("lmstudio_dirs", [])
        dialog = ModelsDialog(**kwargs)
        qtbot.addWidget(dialog)
        made.append(dialog)
        dialog.show()
        qtbot.waitUntil(lambda: not dialog.busy, timeout=WAIT_MS)
        return dialog

    yield make
    for dialog in made:
        dialog.shutdown()


def _select(qtbot: QtBot, dialog: ModelsDialog, name: str) -> None:
    dialog.local.models_table.selectRow(_row_of(dialog.local.models_table, name))
    qtbot.waitUntil(lambda: not dialog.busy and dialog.local.details.details_table.rowCount() > 0)


def test_lists_models_and_broken_files_with_reasons(
    qtbot: QtBot, make_dialog: DialogFactory, library: Path, demo_models: Any, gemma_model: Path
) -> None:
    dialog = make_dialog(extra_dirs=[library])
    assert dialog.objectName() == "modelsDialog"
    rows = _rows(dialog.local.models_table)
    assert set(rows) == {
        demo_models.f32.name,
        demo_models.q4_1.name,
        demo_models.q8_0.name,
        gemma_model.name,
        "empty.gguf",
        "random.gguf",
        "cut-header.gguf",
    }
    f32 = rows[demo_models.f32.name]
    assert f32["Source"] == "folder (read-only)"
    assert (f32["Architecture"], f32["Quantization"], f32["Params"]) == ("llama", "F32", "135M")
    assert f32["Vocab"] == "gpt2/49152" and f32["Status"] == "ok"
    assert rows[gemma_model.name]["Architecture"] == "gemma3"
    assert rows["empty.gguf"]["Status"] == EMPTY_FILE
    assert rows["random.gguf"]["Status"] == NOT_GGUF
    assert rows["cut-header.gguf"]["Status"].startswith("file is truncated")
    status = _column(dialog.local.models_table, "Status")
    bad = _item(dialog.local.models_table, _row_of(dialog.local.models_table, "empty.gguf"), status)
    assert bad.foreground().color() == status_color(Status.ERROR)
    assert dialog.local.scan_label.text() == "7 files, 3 unusable"

    # A broken file selected shows its reason and offers nothing to make.
    _select(qtbot, dialog, "random.gguf")
    assert _details(dialog)["status"] == NOT_GGUF
    assert dialog.local.details.drafts_table.rowCount() == 0
    assert not dialog.local.make_draft_button.isEnabled()


def test_target_shows_ranked_drafts_refusals_and_memory(
    qtbot: QtBot, make_dialog: DialogFactory, library: Path, demo_models: Any, gemma_model: Path
) -> None:
    dialog = make_dialog(extra_dirs=[library], n_ctx=2048, n_gpu_layers=0)
    _select(qtbot, dialog, demo_models.f32.name)
    details = _details(dialog)
    assert details["quantization"] == "F32" and details["chat template"] == "yes"
    assert details["vocabulary"].startswith("gpt2") and details["context length"] == "8192"
    assert "At 2048 tokens of context, GPU layers 0" in dialog.local.details.memory_label.text()
    assert "of RAM" in dialog.local.details.memory_label.text()

    drafts = _rows(dialog.local.details.drafts_table)
    names = list(drafts)
    # Usable drafts first, smallest first: Q4_1 before Q8_0; refused files after them.
    assert names[:2] == [demo_models.q4_1.name, demo_models.q8_0.name]
    assert drafts[demo_models.q4_1.name]["Verdict"].startswith("compatible, ")
    assert drafts[demo_models.q4_1.name]["Quantization"] == "Q4_1"
    gemma = drafts[gemma_model.name]["Verdict"]
    assert gemma == "vocabulary type differs (target gpt2, draft llama)"
    assert drafts["empty.gguf"]["Verdict"] == f"unreadable: {EMPTY_FILE}"
    assert demo_models.f32.name not in drafts  # never its own draft
    verdict = _column(dialog.local.details.drafts_table, "Verdict")
    refused = _item(
        dialog.local.details.drafts_table,
        _row_of(dialog.local.details.drafts_table, gemma_model.name),
        verdict,
    )
    assert refused.foreground().color() == status_color(Status.ERROR)
    assert dialog.local.details.drafts_title.text().startswith(
        f"Drafts for {demo_models.f32.name}: 2 usable"
    )

    # The window's settings change the estimate.
    dialog.set_memory_settings(512, -1)
    qtbot.waitUntil(
        lambda: (
            "At 512 tokens of context, GPU layers all" in dialog.local.details.memory_label.text()
        )
    )


def test_make_draft_quantizes_in_the_background_and_lists_the_result(
    qtbot: QtBot, make_dialog: DialogFactory, library: Path, demo_models: Any, tmp_path: Path
) -> None:
    drafts_dir = tmp_path / "drafts"
    dialog = make_dialog(extra_dirs=[library], drafts_dir=drafts_dir)
    _select(qtbot, dialog, demo_models.q8_0.name)
    dialog.local.draft_type_combo.setCurrentText("Q4_0")
    made = "SmolLM2-135M-Instruct.Q4_0.gguf"
    assert made not in _rows(dialog.local.models_table)

    changed: list[list[Path]] = []
    dialog.foldersChanged.connect(changed.append)
    with qtbot.waitSignal(dialog.modelsChanged, timeout=WAIT_MS):
        dialog.local.make_draft_button.click()
        # The click returned at once: the work is on a pool thread, a busy bar shows it.
        assert (
            dialog.local.quantize_busy.isVisibleTo(dialog)
            and not dialog.local.make_draft_button.isEnabled()
        )
        assert dialog.local.local_status_label.text().startswith("Quantizing ")
    qtbot.waitUntil(lambda: made in _rows(dialog.local.models_table), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: not dialog.busy and dialog.local.details.drafts_table.rowCount() > 0)

    assert (drafts_dir / made).is_file()
    assert [p.name for p in drafts_dir.iterdir()] == [made]  # no partial file left
    status = dialog.local.local_status_label.text()
    assert status.startswith(f"Made {made} (Q4_0, ") and "compatible with" in status
    assert changed == [[library, drafts_dir]]  # its folder is searched from now on
    assert _rows(dialog.local.models_table)[made]["Quantization"] == "Q4_0"
    # The source is selected again and its draft list judges the new file.
    assert dialog.local.selected_path() == library / demo_models.q8_0.name
    assert _rows(dialog.local.details.drafts_table)[made]["Verdict"].startswith("compatible, ")
    assert (
        not dialog.local.quantize_busy.isVisibleTo(dialog)
        and dialog.local.make_draft_button.isEnabled()
    )

    # Making the same draft again says so in one sentence instead of overwriting it.
    dialog.local.make_draft("Q4_0")
    qtbot.waitUntil(lambda: not dialog.busy, timeout=WAIT_MS)
    assert dialog.local.local_status_label.text() == (
        f"A file named {made} already exists in {drafts_dir}; it is in the list already."
    )


def test_add_file_lists_that_file_alone_and_reopening_rescans(
    qtbot: QtBot, make_dialog: DialogFactory, tmp_path: Path
) -> None:
    folder = tmp_path / "elsewhere"
    first = write_tiny_gguf(folder / "first.gguf")
    write_tiny_gguf(folder / "neighbour.gguf")  # in the same folder, never asked for
    dialog = make_dialog()
    assert dialog.local.models_table.rowCount() == 0 and not dialog.local.folder_list.isVisibleTo(
        dialog
    )

    folders: list[list[Path]] = []
    dialog.foldersChanged.connect(folders.append)
    with qtbot.waitSignal(dialog.modelsChanged):
        dialog.local.add_file(first)
    assert folders == [[first]]
    qtbot.waitUntil(lambda: dialog.local.selected_path() == first, timeout=WAIT_MS)
    assert dialog.extra_dirs == [first] and dialog.local.folder_list.count() == 1
    rows = _rows(dialog.local.models_table)
    assert list(rows) == ["first.gguf"]
    assert rows["first.gguf"]["Source"] == "folder (read-only)"

    # Closed and opened again, the dialog sees that the file changed meanwhile.
    dialog.reject()
    first.write_bytes(b"")
    dialog.show()
    qtbot.waitUntil(
        lambda: "empty" in _rows(dialog.local.models_table)["first.gguf"]["Status"],
        timeout=WAIT_MS,
    )

    dialog.local.remove_folder(first)
    assert folders == [[first], []]
    qtbot.waitUntil(lambda: dialog.local.models_table.rowCount() == 0, timeout=WAIT_MS)
    assert (
        dialog.local.selected_path() is None and dialog.local.details.details_table.rowCount() == 0
    )


# ---------------------------------------------------------------------------------------------
# Downloads from the local fake Hub


@pytest.fixture(scope="module")
def payload(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real tiny GGUF of about 2.4 MB: several reads long, listed as a model once it lands."""
    path = tmp_path_factory.mktemp("payload") / "tiny.gguf"
    return write_tiny_gguf(path, tensor_elements=300_000).read_bytes()


@pytest.fixture()
def hub(payload: bytes, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    with FakeHub() as server:
        server.add_repo(
            REPO,
            {
                "tiny-q4_0.gguf": FakeFile(payload),
                "sub/big-Q2_K-00001-of-00002.gguf": FakeFile(payload[:1000]),
                "sub/big-Q2_K-00002-of-00002.gguf": FakeFile(payload[1000:]),
                "README.md": FakeFile(b"# tiny\n", lfs=False),
            },
        )
        # As a user points SpecChat at a mirror: the Hub client reads it when it runs.
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        yield server


def _list_repo(qtbot: QtBot, dialog: ModelsDialog, repo: str) -> None:
    dialog.tabs.setCurrentIndex(1)
    dialog.downloads.repo_edit.setText(repo)
    dialog.downloads.list_files_button.click()
    qtbot.waitUntil(lambda: not dialog.busy, timeout=WAIT_MS)


def _remote_names(dialog: ModelsDialog) -> list[str]:
    items = [
        dialog.downloads.remote_list.item(i) for i in range(dialog.downloads.remote_list.count())
    ]
    return [item.text() for item in items if item is not None]


@pytest.mark.network
def test_download_from_the_hub_shows_progress_and_lists_the_file(
    qtbot: QtBot, make_dialog: DialogFactory, hub: FakeHub, payload: bytes
) -> None:
    dialog = make_dialog()
    assert dialog.local.models_table.rowCount() == 0
    _list_repo(qtbot, dialog, REPO)
    assert _remote_names(dialog) == [
        "sub/big-Q2_K-00001-of-00002.gguf (2.3 MiB in 2 parts)",
        "tiny-q4_0.gguf (2.3 MiB)",
    ]
    assert dialog.downloads.progress_label.text() == f"{REPO}: 2 GGUF files"

    seen: list[tuple[int, str]] = []
    dialog.downloads.progress_bar.valueChanged.connect(
        lambda value: seen.append((value, dialog.downloads.progress_label.text()))
    )
    dialog.downloads.remote_list.setCurrentRow(1)
    with qtbot.waitSignal(dialog.modelsChanged, timeout=WAIT_MS):
        dialog.downloads.download_button.click()
        assert (
            dialog.downloads.cancel_button.isEnabled()
            and not dialog.downloads.download_button.isEnabled()
        )
    qtbot.waitUntil(lambda: "tiny-q4_0.gguf" in _rows(dialog.local.models_table), timeout=WAIT_MS)

    landed = models_dir() / "acme" / "Tiny-GGUF" / "tiny-q4_0.gguf"
    assert landed.read_bytes() == payload
    assert dialog.downloads.progress_bar.value() == dialog.downloads.progress_bar.maximum()
    assert dialog.downloads.progress_label.text() == (
        f"Downloaded tiny-q4_0.gguf (2.3 MiB) to {landed.parent}."
    )
    # Progress went through "bytes done / total" before the end.
    assert any(" / 2.3 MiB" in text for _value, text in seen), seen
    assert dialog.downloads.download_error_label.text() == ""
    row = _rows(dialog.local.models_table)["tiny-q4_0.gguf"]
    assert row["Source"] == "app" and row["Status"].startswith("ok")
    assert dialog.local.selected_path() == landed
    assert (
        not dialog.downloads.cancel_button.isEnabled()
        and dialog.downloads.download_button.isEnabled()
    )


@pytest.mark.network
def test_cancelled_download_lists_nothing(
    qtbot: QtBot, make_dialog: DialogFactory, hub: FakeHub
) -> None:
    dialog = make_dialog()
    _list_repo(qtbot, dialog, REPO)
    dialog.downloads.remote_list.setCurrentRow(1)
    changed: list[bool] = []
    dialog.modelsChanged.connect(lambda: changed.append(True))
    dialog.downloads.download_button.click()
    dialog.downloads.cancel_button.click()
    qtbot.waitUntil(lambda: not dialog.busy, timeout=WAIT_MS)

    assert (
        dialog.downloads.progress_label.text()
        == "Download cancelled; starting it again resumes it."
    )
    assert dialog.downloads.download_error_label.text() == ""  # a cancel is not an error
    assert changed == []
    dialog.local.refresh()
    qtbot.waitUntil(lambda: not dialog.busy, timeout=WAIT_MS)
    assert dialog.local.models_table.rowCount() == 0
    # Whatever arrived before the cancel stays hidden, for a later resume.
    folder = models_dir() / "acme" / "Tiny-GGUF"
    leftovers = [p.name for p in folder.rglob("*")] if folder.exists() else []
    assert all(name.startswith(".") and name.endswith(".incomplete") for name in leftovers)
    assert (
        dialog.downloads.download_button.isEnabled()
        and not dialog.downloads.cancel_button.isEnabled()
    )


@pytest.mark.network
def test_hub_errors_read_as_one_sentence(
    qtbot: QtBot, make_dialog: DialogFactory, hub: FakeHub
) -> None:
    dialog = make_dialog()
    _list_repo(qtbot, dialog, "acme/Nothing-Here")
    message = dialog.downloads.download_error_label.text()
    assert message.startswith("Repository acme/Nothing-Here not found on 127.0.0.1:")
    assert message.endswith(".") and "\n" not in message
    assert _remote_names(dialog) == []

    # A catalog pair points at the real Hub's repositories; the fake one has none of them.
    dialog.downloads.catalog_table.selectRow(0)
    dialog.downloads.catalog_buttons["draft"].click()
    qtbot.waitUntil(lambda: not dialog.busy, timeout=WAIT_MS)
    assert dialog.downloads.download_error_label.text().startswith(
        "Repository Qwen/Qwen2.5-0.5B-Instruct"
    )
    assert dialog.local.models_table.rowCount() == 0


def test_opens_on_the_loaded_target_with_the_loaded_models_marked(
    qtbot: QtBot, make_dialog: DialogFactory, tmp_path: Path, demo_models: Any
) -> None:
    folder = tmp_path / "demo-family"
    folder.mkdir()
    for source in (demo_models.f32, demo_models.q8_0):  # no Q4_1 here: it is the package's
        (folder / source.name).symlink_to(source)
    target = folder / demo_models.f32.name
    dialog = make_dialog(extra_dirs=[folder], loaded=(target, demo_models.q4_1))
    qtbot.waitUntil(
        lambda: not dialog.busy and dialog.local.details.drafts_table.rowCount() > 0,
        timeout=WAIT_MS,
    )
    assert dialog.local.selected_path() == target  # the details are never blank on opening

    table = dialog.local.models_table
    rows = _rows(table)
    # The demo draft in use is the bundled file, listed beside the derived demo files.
    assert rows[demo_models.q4_1.name]["Source"] == "bundled (read-only)"
    marks = {name: cells["In use"] for name, cells in rows.items()}
    assert marks == {
        target.name: "target",
        demo_models.q4_1.name: "draft",
        demo_models.q8_0.name: "",
    }
    assert _item(table, _row_of(table, target.name), 0).font().bold()
    assert not _item(table, _row_of(table, demo_models.q8_0.name), 0).font().bold()
    drafts = _rows(dialog.local.details.drafts_table)
    assert drafts[demo_models.q4_1.name]["Verdict"].startswith("in use; compatible")
    assert not drafts[demo_models.q8_0.name]["Verdict"].startswith("in use")

    # The window loads another draft: the marks follow.
    dialog.set_loaded(target, folder / demo_models.q8_0.name)
    marks = {name: cells["In use"] for name, cells in _rows(table).items()}
    assert marks[demo_models.q8_0.name] == "draft" and marks[demo_models.q4_1.name] == ""
    assert dialog.local.selected_path() == target


def test_without_loaded_models_the_first_file_is_selected_and_columns_fit(
    qtbot: QtBot, make_dialog: DialogFactory, library: Path
) -> None:
    dialog = make_dialog(extra_dirs=[library])
    qtbot.waitUntil(
        lambda: not dialog.busy and dialog.local.details.details_table.rowCount() > 0,
        timeout=WAIT_MS,
    )
    first = dialog.local.entries[0].path
    assert dialog.local.selected_path() == first
    assert _details(dialog)["path"] == str(first)

    table = dialog.local.models_table
    assert table.horizontalScrollBar().maximum() == 0  # every column in view
    header = table.horizontalHeader()
    used = sum(header.sectionSize(c) for c in range(table.columnCount()))
    assert used >= table.viewport().width() - 2  # the columns fill the table's width
    metrics = table.fontMetrics()
    for row in range(table.rowCount()):  # every name is shown whole
        name = _item(table, row, 0).text()
        assert header.sectionSize(0) >= metrics.horizontalAdvance(name), name
