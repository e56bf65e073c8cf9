"""The Download tab's speed reads the network's pace: a resumed file's partial is hashed at disk
speed first, and neither those bytes nor that time count."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pytestqt.qtbot import QtBot

from models.hub import DownloadProgress
from ui.dialogs import download_tab
from ui.dialogs.download_tab import DownloadTab
from ui.workers.jobs import Job, Jobs

MIB = 2**20


@pytest.fixture
def tab(qtbot: QtBot) -> Iterator[DownloadTab]:
    jobs = Jobs(threads=1)
    widget = DownloadTab(jobs)
    qtbot.addWidget(widget)
    yield widget
    jobs.shutdown()


def test_a_resumed_downloads_speed_counts_from_where_the_transfer_began(
    tab: DownloadTab, monkeypatch: pytest.MonkeyPatch
) -> None:
    tab._download = Job(1, lambda _value: None)
    clock = iter([0.0, 0.1, 0.1, 1.1])
    monkeypatch.setattr(download_tab.time, "monotonic", lambda: next(clock))
    name, size = "model.gguf", 100 * MIB
    # 23 MiB on disk hashed in a tenth of a second, then 4 MiB over the network in a second.
    tab._on_progress(DownloadProgress(name, 4 * MIB, size, "checking"))
    tab._on_progress(DownloadProgress(name, 23 * MIB, size, "checking"))
    tab._on_progress(DownloadProgress(name, 23 * MIB, size, "downloading", 23 * MIB))
    tab._on_progress(DownloadProgress(name, 27 * MIB, size, "downloading", 23 * MIB))
    assert tab.progress_label.text().endswith(" · 4.0 MiB/s")
