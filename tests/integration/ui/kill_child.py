"""The app in a child process, for the SIGKILL test: one full reply, then a second reply that
the test kills mid-stream. Progress goes to stdout, one word per line."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def main() -> int:
    os.environ["SPECCHAT_DATA_DIR"] = sys.argv[1]
    from ui.main import create_window, ensure_application

    app = ensure_application()
    window = create_window()
    window.show()
    tokens = [0]
    replies = [0]

    def say(word: str) -> None:
        print(word, flush=True)

    def on_ready() -> None:
        if replies[0] == 0 and window.conversation_id is None:
            say("READY")
            window.prompt.setPlainText("Name three colours.")
            window.send()

    def on_reply(_stats: dict[str, object]) -> None:
        replies[0] += 1
        say("FIRST_DONE")
        window.settings.set("generation/max_tokens", 2000)
        window.prompt.setPlainText("Write a long story about a dragon who learns to cook.")
        window.send()

    def on_token(_event: object) -> None:
        if replies[0] == 1:
            tokens[0] += 1
            if tokens[0] == 10:
                say("STREAMING")

    window.catalogChanged.connect(on_ready)
    window.replyFinished.connect(on_reply)
    window.host.worker.tokenReceived.connect(on_token)
    window.start()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
