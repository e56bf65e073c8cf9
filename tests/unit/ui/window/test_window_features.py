"""What a new user reaches for: a welcome page, copy and edit, the plain-words headline, the
menus and shortcuts, themes, and a window that fits a 1280×720 screen."""

from __future__ import annotations

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from tests.helpers.fake_window import TIMEOUT_MS
from tests.helpers.qt_window import send
from ui.formatting import NO_DRAFT_IN_USE, SPECULATION_OFF
from ui.settings import DRAFT_NONE
from ui.widgets.conversation_view import EXAMPLE_PROMPTS
from ui.window.main_window import MainWindow


def test_the_first_screen_welcomes_and_an_example_fills_the_box(
    window: MainWindow, qtbot: QtBot
) -> None:
    text = window.view.toPlainText()
    assert "Welcome to SpecChat" in text and EXAMPLE_PROMPTS[0] in text
    assert "Shaded text" in text  # the legend of the draft shading
    with qtbot.waitSignal(window.view.examplePicked):
        window.view.anchorClicked.emit(QUrl("example:1"))
    assert window.prompt.toPlainText() == EXAMPLE_PROMPTS[1]
    send(qtbot, window, window.prompt.toPlainText())
    assert "Welcome to SpecChat" not in window.view.toPlainText()


def test_copy_links_put_a_message_and_a_code_block_on_the_clipboard(
    window: MainWindow, qtbot: QtBot
) -> None:
    send(qtbot, window, "Hello")
    reply = window.view.messages[-1]
    with qtbot.waitSignal(window.view.copied):
        window.view.anchorClicked.emit(QUrl("copy:1"))
    assert QGuiApplication.clipboard().text() == reply.text
    window.copy_last_reply()
    assert QGuiApplication.clipboard().text() == reply.text
    # A reply with code: its own link copies the code without the fences.
    reply.text = "Try:\n```python\nprint('x')\n```\n"
    window.view.anchorClicked.emit(QUrl("copycode:1:0"))
    assert QGuiApplication.clipboard().text() == "print('x')\n"


def test_edit_and_resend_takes_the_last_message_back_into_the_box(
    window: MainWindow, qtbot: QtBot
) -> None:
    send(qtbot, window, "First question")
    send(qtbot, window, "Second question with a typo")
    assert "Edit and resend" in window.view.toPlainText()
    with qtbot.waitSignal(window.view.editRequested):
        window.view.anchorClicked.emit(QUrl("edit:"))
    assert window.prompt.toPlainText() == "Second question with a typo"
    assert window.conversation_id is not None
    # Out of view and out of the model's reading; stored until the edit replaces it.
    assert [m.role for m in window.view.messages] == ["user", "assistant"]
    assert [m["content"] for m in window.chat.history() if m["role"] == "user"] == [
        "First question"
    ]
    window.prompt.setPlainText("Second question, fixed")
    send(qtbot, window, window.prompt.toPlainText())
    stored = window.store.messages(window.conversation_id)
    assert [m.role for m in stored] == ["user", "assistant"] * 2
    assert stored[2].content == "Second question, fixed"


def test_the_headline_says_in_plain_words_what_speculation_did(
    window: MainWindow, qtbot: QtBot
) -> None:
    stats = send(qtbot, window, "Hello")
    headline = window.controls.headline.text()
    assert stats["speedup"] is not None
    assert f"{stats['speedup']:.2f}× plain speed" in stats["summary"]
    assert "without a draft" in headline
    assert "plain target step" in window.controls.headline.toolTip()
    window.controls.speculation.setChecked(False)
    send(qtbot, window, "Again")
    # Why it ran plain: a draft is loaded, so "no draft was in use" would not be true.
    assert window.controls.headline.text() == f"Plain decoding: {SPECULATION_OFF}."
    window.controls.speculation.setChecked(True)
    with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
        window.choose_draft(DRAFT_NONE)
    send(qtbot, window, "Once more")
    assert window.controls.headline.text() == f"Plain decoding: {NO_DRAFT_IN_USE}."


def test_every_menu_shortcut_is_listed_in_the_help(window: MainWindow, qtbot: QtBot) -> None:
    table = dict(window.shortcut_table())
    for keys in ("Ctrl+N", "Ctrl+R", "Ctrl+Shift+C", "Ctrl+E", "Ctrl+M", "F1", "Esc"):
        assert keys in table, keys
    box = window.shortcuts_action.trigger()
    del box
    dialogs = [w for w in QApplication.topLevelWidgets() if w.objectName() == "shortcutsDialog"]
    assert dialogs and "Regenerate" in dialogs[-1].text()
    dialogs[-1].close()


def test_the_dark_theme_recolours_the_window_and_is_remembered(
    window: MainWindow, qtbot: QtBot
) -> None:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    light_base = app.palette().color(QPalette.ColorRole.Base).lightness()
    dark = next(a for a in window.theme_actions.actions() if a.data() == "dark")
    try:
        dark.trigger()
        assert app.palette().color(QPalette.ColorRole.Base).lightness() < 64
        assert window.settings.get_str("view/theme") == "dark"
        qtbot.waitUntil(
            lambda: window.view.palette().color(QPalette.ColorRole.Base).lightness() < 64
        )
    finally:
        system = next(a for a in window.theme_actions.actions() if a.data() == "system")
        system.trigger()
    assert app.palette().color(QPalette.ColorRole.Base).lightness() == light_base


def test_the_window_fits_a_1280_by_720_screen(window: MainWindow, qtbot: QtBot) -> None:
    hint = window.minimumSizeHint()
    assert hint.width() <= 1280 and hint.height() <= 720, hint
    window.resize(1280, 720)
    qtbot.waitUntil(lambda: window.width() <= 1280, timeout=TIMEOUT_MS)
    # Every panel keeps a readable width at that size.
    assert window.conversations.width() >= 140
    assert window.side_tabs.width() >= 260
    assert window.view.width() >= 500
    assert window.controls.target_combo.width() >= 180


def test_tab_walks_every_control_and_wraps_without_typing_into_the_system_prompt(
    window: MainWindow, qtbot: QtBot
) -> None:
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=TIMEOUT_MS)
    window.prompt.setFocus()
    qtbot.waitUntil(window.prompt.hasFocus)
    reached: list[QWidget] = []
    for _ in range(120):
        widget = QApplication.focusWidget()
        assert widget is not None
        reached.append(widget)
        qtbot.keyClick(widget, Qt.Key.Key_Tab)
        if QApplication.focusWidget() is window.prompt:
            break
    assert QApplication.focusWidget() is window.prompt  # round the window and back
    # Past the system prompt, on to the controls that come after it in the window.
    assert window.settings_panel.system_prompt in reached
    assert window.controls.target_combo in reached and window.controls.speculation in reached
    assert window.settings_panel.system_prompt.toPlainText() == ""
    assert window.settings.get_str("generation/system_prompt") == ""


def test_a_title_cleared_in_the_list_leaves_the_chat_its_own(
    window: MainWindow, qtbot: QtBot
) -> None:
    # The store made it "Untitled" for good.
    send(qtbot, window, "Plan a picnic")
    chat = window.conversation_id
    assert chat is not None
    for cleared in ("", "   ", "\u200b"):
        window.conversations.list.item(0).setText(cleared)  # the list's editor, emptied
        summary = window.store.conversation(chat)
        assert summary is not None and summary.title == "Plan a picnic"
        assert window.conversations.titles() == ["Plan a picnic"]
    window.conversations.list.item(0).setText("Picnic")
    assert window.conversations.titles() == ["Picnic"]


def test_an_earlier_error_goes_when_the_next_reply_starts(window: MainWindow, qtbot: QtBot) -> None:
    # A banner about a context since raised stayed above every later reply.
    window.show_error("The conversation is 559 tokens but the context holds 256.")
    assert window.banner.text
    send(qtbot, window, "Hello again")
    assert window.banner.text == ""
