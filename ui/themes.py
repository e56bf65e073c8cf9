"""Light, dark or the system's look: one palette per theme, applied to the whole application.

Every widget paints from the palette (the conversation's shading and code blocks, the charts),
so switching the palette is all a theme needs. The few colours a palette has no role for,
status text (an error, a usable draft, a warning) and muted text, are worked out here from the
palette too, so that each reads at WCAG AA (4.5:1) on whatever theme is in use.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory

# WCAG 2 AA for body text against what is behind it.
TEXT_CONTRAST = 4.5


class Status(Enum):
    """What coloured status text says; its colour comes from status_color."""

    ERROR = "error"
    OK = "ok"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Theme:
    label: str
    colors: dict[QPalette.ColorRole, str]  # empty: the platform's own palette
    # Each at least TEXT_CONTRAST on the theme's Window, Base and AlternateBase (status text
    # sits on labels and in table rows of both shades). Empty: chosen by the palette's lightness.
    status: dict[Status, str]


_ROLE = QPalette.ColorRole
THEMES: dict[str, Theme] = {
    "system": Theme("Follow the system", {}, {}),
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
            _ROLE.Highlight: "#2b6be0",
            _ROLE.HighlightedText: "#ffffff",
            _ROLE.ToolTipBase: "#ffffdc",
            _ROLE.ToolTipText: "#1e1e1e",
            _ROLE.PlaceholderText: "#6b6b6b",
            _ROLE.Link: "#2962d9",
        },
        {Status.ERROR: "#c62828", Status.OK: "#2a7a2e", Status.WARNING: "#8f5a00"},
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
            _ROLE.Highlight: "#2d6ee6",
            _ROLE.HighlightedText: "#ffffff",
            _ROLE.ToolTipBase: "#2b2c2f",
            _ROLE.ToolTipText: "#e8e8e8",
            _ROLE.PlaceholderText: "#909090",
            _ROLE.Link: "#7aa7ff",
        },
        {Status.ERROR: "#ff7b72", Status.OK: "#56d364", Status.WARNING: "#e3b341"},
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


def is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def status_color(status: Status, palette: QPalette | None = None) -> QColor:
    """The colour of status text on `palette` (default: the application's). The system's own
    palette gets the set of the theme it looks like."""
    palette = palette or QApplication.palette()
    theme = THEMES["dark" if is_dark(palette) else "light"]
    return QColor(theme.status[status])


def status_style(status: Status | None) -> str:
    """A label's style sheet for status text; empty for plain text."""
    return "" if status is None else f"color: {status_color(status).name()};"


def mix(a: QColor, b: QColor, t: float) -> QColor:
    """From a (t = 0) to b (t = 1), channel by channel."""
    return QColor(
        round(a.red() + (b.red() - a.red()) * t),
        round(a.green() + (b.green() - a.green()) * t),
        round(a.blue() + (b.blue() - a.blue()) * t),
    )


def luminance(color: QColor) -> float:
    """WCAG 2 relative luminance."""

    def channel(value: int) -> float:
        v = value / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return (
        0.2126 * channel(color.red())
        + 0.7152 * channel(color.green())
        + 0.0722 * channel(color.blue())
    )


def contrast(a: QColor, b: QColor) -> float:
    """WCAG 2 contrast ratio, 1 to 21."""
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def muted(text: QColor, background: QColor) -> QColor:
    """Secondary text: as far toward the background as it can go and still read at
    TEXT_CONTRAST (the text itself where even that is short of it)."""
    for step in range(40, 101, 5):
        candidate = mix(background, text, step / 100)
        if contrast(candidate, background) >= TEXT_CONTRAST:
            return candidate
    return QColor(text)


def readable(color: QColor, text: QColor, background: QColor) -> QColor:
    """A coloured label's colour (a chart series' name) moved toward the text colour only as
    far as it takes to read at TEXT_CONTRAST, so it keeps its hue where it can."""
    for step in range(0, 101, 5):
        candidate = mix(color, text, step / 100)
        if contrast(candidate, background) >= TEXT_CONTRAST:
            return candidate
    return QColor(text)
