"""Screenshots of the window as a new user meets it, on a 1280×720 screen and a fresh profile.

    QT_QPA_PLATFORM=offscreen PYTHONPATH=. python scripts/window_screenshots.py [docs/screenshots]

Writes first-start.png (the demo pair just loaded), mid-reply.png (a long chat, a reply
streaming), restart-draft-list.png (the window after a restart, its Draft list open),
models-dialog.png (the Models dialog over the window) and suffix-shading.png (a question of the
first session asked again in a new chat). Each is the whole screen as the offscreen
platform composes it, popups and dialogs included. The profile is a throw-away folder; the demo
family is derived into it (a few seconds), or linked from SPECCHAT_TEST_MODEL_CACHE when set.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCREEN = REPO / "tests" / "screen-1280x720.json"
if os.environ.get("QT_QPA_PLATFORM", "offscreen") == "offscreen":
    os.environ["QT_QPA_PLATFORM"] = f"offscreen:configfile={SCREEN}"

from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.store import ConversationStore  # noqa: E402
from models.demo import demo_file_name  # noqa: E402
from ui.main import create_window, ensure_application  # noqa: E402
from ui.settings import Settings  # noqa: E402
from ui.window.main_window import MainWindow, UiState  # noqa: E402

CHAT = (
    "Explain speculative decoding to a friend in three sentences.",
    "Write a Python function that checks whether a word is a palindrome.",
    "Summarise the plot of Romeo and Juliet in five bullet points.",
)
LONG = "Write a short story about a lighthouse keeper who befriends a seagull."


def _settle(until_s: float = 0.4, done: Callable[[], bool] | None = None) -> None:
    deadline = time.monotonic() + 600
    while done is not None and not done() and time.monotonic() < deadline:
        QApplication.processEvents()
        time.sleep(0.02)
    end = time.monotonic() + until_s
    while time.monotonic() < end:
        QApplication.processEvents()
        time.sleep(0.02)


def _shot(path: Path) -> None:
    screen = QApplication.primaryScreen()
    screen.grabWindow(0).save(str(path))
    size = screen.geometry().size()
    print(f"wrote {path} ({size.width()}×{size.height()})")


def _open(data: Path) -> MainWindow:
    settings = Settings(QSettings(str(data / "settings.ini"), QSettings.Format.IniFormat))
    window = create_window(
        ConversationStore(data / "conversations.sqlite3"), settings, models_folder=data / "models"
    )
    window.show()
    window.start()
    _settle(1.0, done=lambda: window.models.catalog is not None and window.state == UiState.Idle)
    return window


def _send(window: MainWindow, text: str, *, wait: bool = True) -> None:
    window.prompt.setPlainText(text)
    window.send()
    if wait:
        _settle(0.3, done=lambda: window.state == UiState.Idle)


def _close(window: MainWindow) -> None:
    window.close()
    window.deleteLater()
    _settle(0.2)


def _link_cached_demo(data: Path) -> None:
    cache = os.environ.get("SPECCHAT_TEST_MODEL_CACHE")
    if not cache:
        return
    folder = data / "models" / "demo"
    folder.mkdir(parents=True, exist_ok=True)
    for type_name in ("F32", "Q8_0", "Q4_0", "Q2_K"):
        source = Path(cache) / demo_file_name(type_name)
        if source.is_file():
            (folder / demo_file_name(type_name)).symlink_to(source)


def shoot(out: Path, data: Path) -> None:
    os.environ["SPECCHAT_DATA_DIR"] = str(data)
    _link_cached_demo(data)
    ensure_application()
    # Replies of up to 128 tokens, as a new user's first chats were measured.
    QSettings(str(data / "settings.ini"), QSettings.Format.IniFormat).setValue(
        "generation/max_tokens", 128
    )

    window = _open(data)
    _shot(out / "first-start.png")
    for text in CHAT:
        _send(window, text)
    _send(window, LONG, wait=False)
    _settle(0.2, done=lambda: len(window.view.streaming_text) > 200)
    _shot(out / "mid-reply.png")
    _settle(0.3, done=lambda: window.state == UiState.Idle)
    _close(window)

    window = _open(data)
    window.controls.draft_combo.showPopup()
    _settle(0.5)
    _shot(out / "restart-draft-list.png")
    window.controls.draft_combo.hidePopup()
    dialog = window.open_models_dialog()
    _settle(0.5, done=lambda: not dialog.busy)
    _shot(out / "models-dialog.png")
    dialog.close()
    _close(window)

    # A question from the first session, asked again in a new chat: the past-chats index
    # drafts much of the answer, shaded apart from the draft model's tokens. A window of its
    # own, as the offscreen screen keeps the closed dialog's pixels.
    window = _open(data)
    _send(window, CHAT[1])
    _shot(out / "suffix-shading.png")
    _close(window)


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="specchat-window-shots-") as folder:
        shoot(out, Path(folder))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "screenshots"))
