"""Finding one of the view's own links in a QTextDocument, to change it in place."""

from __future__ import annotations

from PySide6.QtGui import QTextCursor, QTextDocument


def last_link(document: QTextDocument, href: str, separator: str) -> QTextCursor | None:
    """A cursor selecting the last link to `href` with `separator` before it, searching back
    from the end; None when there is none. A reply's own Markdown link to the same href has no
    separator before it, and is passed over."""
    block = document.lastBlock()
    while block.isValid():
        fragments = block.begin()
        while not fragments.atEnd():
            fragment = fragments.fragment()
            if fragment.charFormat().anchorHref() == href:
                cursor = QTextCursor(document)
                cursor.setPosition(fragment.position() - len(separator))
                end = fragment.position() + fragment.length()
                cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
                if cursor.selectedText().startswith(separator):
                    return cursor
            fragments += 1
        block = block.previous()
    return None
