"""The page an empty conversation shows: what SpecChat does, what shaded text means, and
example prompts to start from (their links, "example:N", put one in the message box)."""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from app.store import TokenSource

EXAMPLE_PROMPTS = (
    "Explain speculative decoding to a friend in three sentences.",
    "Write a Python function that checks whether a word is a palindrome.",
    "Summarise the plot of Romeo and Juliet in five bullet points.",
    "Viết một đoạn ngắn giới thiệu Hà Nội.",
)


def welcome_html(shade: Callable[[TokenSource, str], str], muted: str) -> str:
    """`shade` wraps text in a source's shade; `muted` is the colour of the last line."""
    examples = "".join(
        f'<li><a href="example:{i}">{escape(text, quote=False)}</a></li>'
        for i, text in enumerate(EXAMPLE_PROMPTS)
    )
    return (
        '<div style="margin:24px">'
        "<h2>Welcome to SpecChat</h2>"
        "<p>Chat with a local model, offline. A smaller <b>draft</b> model guesses the "
        "next few words and the <b>target</b> model checks them all at once, so replies "
        "come faster while staying exactly what the target would write.</p>"
        "<p><b>Shaded text</b> is text the draft guessed and the target accepted: "
        f"{shade(TokenSource.DRAFT, 'green from the draft model')}, "
        f"{shade(TokenSource.SUFFIX, 'amber from the chat history')} (text of "
        "this chat or past chats). The panel on the right shows how much faster each "
        "reply was, and why.</p>"
        f"<p><b>Try one of these</b>, or write your own below:</p><ul>{examples}</ul>"
        f'<p style="color:{muted}">Enter sends, Shift+Enter starts a new line, Esc '
        "stops a reply. Help → Keyboard shortcuts lists the rest.</p></div>"
    )
