"""Light, dark or the system's look: one palette per theme, applied to the whole application.

Every widget paints from the palette (the conversation's shading and code blocks, the charts),
so switching the palette is all a theme needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory


@dataclass(frozen=True, slots=True)
class Theme:
    label: str
    colors: dict[QPalette.ColorRole, str]  # empty: the platform's own palette


_ROLE = QPalette.ColorRole
THEMES: dict[str, Theme] = {
    "system": Theme("Follow the system", {}),
    "light": Theme(
        "Light",
        {
            _ROLE.Window: "#f3f3f3",
            _ROLE.WindowText: "#1e1e1e",
            _ROLE.Base: "#ffffff",
            _ROLE.AlternateBase: "#f0f0f0",
            _ROLE.Text: "#1e1e1e",
            _ROLE.Button: "#ebebeb",
            _ROLE.ButtonText: "#1e1e1e",
            _ROLE.Highlight: "#3478f6",
            _ROLE.HighlightedText: "#ffffff",
            _ROLE.ToolTipBase: "#ffffdc",
            _ROLE.ToolTipText: "#1e1e1e",
            _ROLE.PlaceholderText: "#8a8a8a",
            _ROLE.Link: "#2962d9",
        },
    ),
    "dark": Theme(
        "Dark",
        {
            _ROLE.Window: "#202124",
            _ROLE.WindowText: "#e8e8e8",
            _ROLE.Base: "#17181a",
            _ROLE.AlternateBase: "#26272a",
            _ROLE.Text: "#e8e8e8",
            _ROLE.Button: "#2b2c2f",
            _ROLE.ButtonText: "#e8e8e8",
            _ROLE.Highlight: "#3d7ef7",
            _ROLE.HighlightedText: "#ffffff",
            _ROLE.ToolTipBase: "#2b2c2f",
            _ROLE.ToolTipText: "#e8e8e8",
            _ROLE.PlaceholderText: "#8c8c8c",
            _ROLE.Link: "#7aa7ff",
        },
    ),
}
_system_palette: QPalette | None = None
_system_style: str | None = None


def apply_theme(app: QApplication, key: str) -> None:
    """Switch the application's look; an unknown key falls back to the system's."""
    global _system_palette, _system_style  # noqa: PLW0603 - the look before any theme
    if _system_palette is None:
        _system_palette = QPalette(app.palette())
        _system_style = app.style().name()
    theme = THEMES.get(key, THEMES["system"])
    if not theme.colors:
        if _system_style:
            app.setStyle(QStyleFactory.create(_system_style))
        app.setPalette(_system_palette)
        return
    # Fusion draws every control from the palette, so the colours apply everywhere.
    app.setStyle(QStyleFactory.create("Fusion"))
    palette = QPalette()
    for role, color in theme.colors.items():
        palette.setColor(role, QColor(color))
    disabled = QColor(theme.colors[_ROLE.WindowText])
    disabled.setAlpha(110)
    for role in (_ROLE.WindowText, _ROLE.Text, _ROLE.ButtonText):
        palette.setColor(QPalette.ColorGroup.Disabled, role, disabled)
    app.setPalette(palette)
