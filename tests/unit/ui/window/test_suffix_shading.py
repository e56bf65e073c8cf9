"""A question asked again: the reply's tokens from the past chat are shaded apart from the
draft model's, the stats line counts each source, and the shading survives a reopen."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtGui import QTextCursor
from pytestqt.qtbot import QtBot

from app.engine.runtime import Runtime
from app.llama.config import ModelConfig
from app.llama.model import LoadProgress
from app.store import ConversationStore, TokenSource
from models.compat import check_draft_file
from tests.helpers.fake_model import FakeModel
from tests.helpers.fake_window import TIMEOUT_MS
from tests.helpers.qt_window import close_window, send, write_preferences
from ui.main import create_window, ensure_application
from ui.settings import Settings
from ui.window.main_window import MainWindow, UiState

QUESTION = "Tell me about the local chat window"


def _open_model(config: ModelConfig, *, progress: LoadProgress | None = None) -> FakeModel:
    # A draft twenty times cheaper than its target, so γ auto keeps drafting with it.
    is_draft = "draft" in Path(config.path).name
    step_s = 0.0005 if is_draft else 0.01
    disagree = 4 if is_draft else 0
    return FakeModel(config, progress=progress, step_s=step_s, disagree_every=disagree)


@pytest.fixture
def window(qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]) -> Iterator[MainWindow]:
    """The stand-in window with the past-chats index a real window keeps in its data folder."""
    write_preferences(
        isolated_data_dir,
        {
            "models/target": str(files["target"]),
            "models/draft": str(files["draft"]),
            "models/extra_files": [str(files["target"]), str(files["draft"])],
            "models/n_threads": 1,
            "generation/max_tokens": 16,
        },
    )
    ensure_application()
    ini = str(isolated_data_dir / "settings.ini")
    runtime = Runtime(
        vet_draft=check_draft_file, open_model=_open_model, history_dir=isolated_data_dir
    )
    window = create_window(
        ConversationStore(isolated_data_dir / "conversations.sqlite3"),
        Settings(QSettings(ini, QSettings.Format.IniFormat)),
        models_folder=isolated_data_dir / "models",
        runtime=runtime,
        check_file=lambda _path: None,
    )
    window.show()
    with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
        window.start()
    assert window.state == UiState.Idle, window.banner.text
    yield window
    close_window(window)


def _shade_at(window: MainWindow, source: TokenSource) -> str:
    """The background colour shown under the last reply's first run from `source`."""
    reply = window.view.messages[-1]
    text = next(t for t, s in reply.segments or [] if s == source and t.strip())
    plain = window.view.toPlainText()
    cursor = QTextCursor(window.view.document())
    cursor.setPosition(plain.rindex(text.strip()) + 1)
    return str(cursor.charFormat().background().color().name())


def test_a_question_asked_again_shows_both_sources_and_counts_them(
    window: MainWindow, qtbot: QtBot
) -> None:
    send(qtbot, window, QUESTION)
    window.new_chat()
    window.settings.set("generation/max_tokens", 40)  # the same start, then more
    stats = send(qtbot, window, QUESTION)

    assert stats["mode"] == "hybrid"
    assert stats["suffix_accepted"] > 0 and stats["model_accepted"] > 0, stats["summary"]
    assert stats["suffix_accepted"] + stats["model_accepted"] == stats["accepted"]
    counts = f"accepted {stats['model_accepted']} draft model + {stats['suffix_accepted']} chat"
    view = window.view
    assert counts in view.toPlainText()
    assert "Shaded: draft model · chat history" in view.toPlainText()

    reply = view.messages[-1]
    sources = {source for text, source in reply.segments or [] if text}
    assert {TokenSource.DRAFT, TokenSource.SUFFIX} <= sources
    assert _shade_at(window, TokenSource.SUFFIX) in view.suffix_style
    assert _shade_at(window, TokenSource.DRAFT) in view.mark_style

    # Stored with the reply: reopening the chat shows the same shades and counts.
    conversation = window.conversation_id
    assert conversation is not None
    assert window.store.messages(conversation)[-1].segments == reply.segments
    window.new_chat()
    window.open_conversation(conversation)
    assert _shade_at(window, TokenSource.SUFFIX) in view.suffix_style
    assert _shade_at(window, TokenSource.DRAFT) in view.mark_style
    assert counts in view.toPlainText()
