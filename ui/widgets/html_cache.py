"""Finished replies' HTML, kept per look (highlight, theme) within a bound of characters.

Markdown and code colours are most of a conversation view's rebuild (opening a chat, a theme
or highlight change, an edit taken back): 0.44 s for 300 messages with code, 0.15 s with their
HTML kept. A finished reply does not change, so its HTML is kept, the oldest going first.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

KEPT_RENDERED_CHARS = 16 * 2**20  # at most 64 MB in memory


class HtmlCache:
    def __init__(self, limit_chars: int = KEPT_RENDERED_CHARS) -> None:
        self._limit = limit_chars
        self._html: dict[Hashable, str] = {}  # newest last
        self._chars = 0

    def get(self, key: Hashable, render: Callable[[], str]) -> str:
        html = self._html.pop(key, None)
        if html is None:
            html = render()
            self._chars += len(html)
        self._html[key] = html
        while self._chars > self._limit and len(self._html) > 1:
            self._chars -= len(self._html.pop(next(iter(self._html))))
        return html
