"""A chat exported as Markdown (ChatController.export) goes in whole or not at all: a write
refused midway (a full disk) leaves the file it was to replace as it was."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings

from app.store import ConversationStore
from tests.helpers.refusals import fill_disk_mid_write
from ui.settings import Settings
from ui.window.chat_controller import ChatController


@pytest.fixture
def chats(tmp_path: Path) -> Iterator[ChatController]:
    store = ConversationStore(tmp_path / "chats.sqlite3")
    ini = str(tmp_path / "settings.ini")
    yield ChatController(store, Settings(QSettings(ini, QSettings.Format.IniFormat)))
    store.close()


def _chat(chats: ChatController) -> int:
    chat = chats.store.create_conversation("Sea poems")
    chats.store.add_message(chat, "user", "Write a haiku " * 200)
    return chat


def test_an_export_cut_short_leaves_the_earlier_file_whole(
    chats: ChatController, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "exports" / "chat.md"
    out.parent.mkdir()
    out.write_text("# An earlier export\n", encoding="utf-8")
    fill_disk_mid_write(monkeypatch)
    with pytest.raises(OSError, match="No space left on device"):
        chats.export(_chat(chats), out)
    assert out.read_text(encoding="utf-8") == "# An earlier export\n"
    assert list(out.parent.iterdir()) == [out]


def test_an_export_replaces_the_earlier_file(chats: ChatController, tmp_path: Path) -> None:
    out = tmp_path / "chat.md"
    out.write_text("# An earlier export\n", encoding="utf-8")
    chat = _chat(chats)
    chats.export(chat, out)
    assert out.read_text(encoding="utf-8") == chats.store.export_markdown(chat)


def test_an_export_into_a_missing_folder_is_an_os_error(
    chats: ChatController, tmp_path: Path
) -> None:
    """The window words it: "Could not export the conversation to ...: <the error>"."""
    with pytest.raises(FileNotFoundError):
        chats.export(_chat(chats), tmp_path / "missing-folder" / "chat.md")


@pytest.mark.parametrize(
    "title",
    ["\U0001f30a" * 190, 'a: "b" <c> | d? e* f\\g/h', "..", "x" * 200],
)
def test_the_proposed_file_name_is_one_any_file_system_takes(
    chats: ChatController, title: str
) -> None:
    chat = chats.store.create_conversation(title)
    name = chats.export_name(chat)
    assert name.endswith(".md") and len(name.encode("utf-8")) <= 124
    assert not set(name) & set('/\\:*?"<>|')
    assert name.removesuffix(".md").strip(" .")  # never ".md" or "...md"
