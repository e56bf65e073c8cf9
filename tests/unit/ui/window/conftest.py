"""The stand-in model files and a started window on them (tests.helpers.fake_window): the
real worker thread, Runtime, engine and signals, so these tests take seconds
(tests/integration/ui has the real models)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from tests.helpers.fake_model import CHATML
from tests.helpers.fake_window import TIMEOUT_MS, open_fake_window
from tests.helpers.model_files import default_tokens, write_tiny_gguf
from tests.helpers.qt_window import close_window
from ui.window.main_window import MainWindow, UiState


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """Tiny real GGUF headers (the catalog and the vocabulary check read them); the stand-in
    model decides what loading them does. Names with "draft" make a draft that disagrees at
    every fourth position; "broken" fails to load."""
    folder = tmp_path / "gguf"
    # The headers carry the chat template the stand-in model uses, as a real file would.
    write = functools.partial(write_tiny_gguf, chat_template=CHATML)
    return {
        "target": write(folder / "target.gguf", tensor_elements=4096),
        "target2": write(folder / "second-target.gguf", tensor_elements=2048),
        "draft": write(folder / "small-draft.gguf", tensor_elements=64),
        "broken": write(folder / "broken-target.gguf", tensor_elements=8192),
        "other": write(
            folder / "other-vocab.gguf",
            tokens=[*default_tokens(3), *[f"other{i}" for i in range(3, 64)]],
            tensor_elements=32,
        ),
    }


@pytest.fixture
def window(qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]) -> Iterator[MainWindow]:
    window = open_fake_window(isolated_data_dir, files)
    with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
        window.start()
    assert window.state == UiState.Idle, window.banner.text
    yield window
    close_window(window)
