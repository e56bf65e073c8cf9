"""The γ box: Auto or a draft length, typed the way every front end spells γ
(app.engine.gamma.parse_gamma: "auto" in any case, or 1..16).

Its 0 is Auto. Off is not a γ here: the Speculation box beside it switches speculation off,
and does so even mid-reply.
"""

from __future__ import annotations

from PySide6.QtGui import QValidator
from PySide6.QtWidgets import QSpinBox, QWidget

from app.engine.gamma import AUTO, GammaSetting, fixed, parse_gamma
from app.errors import InvalidSettingError
from ui.settings import INT_RANGES

AUTO_TEXT = "Auto"
PREFIX = "γ "
GAMMA_TIP = (
    'γ: draft tokens proposed per round, 1 to 16, or Auto (type "auto"): γ auto picks each '
    "round's length from the measured acceptance and costs, and pauses speculation while it "
    "does not pay. Takes effect from the next round, even mid-reply."
)


class GammaBox(QSpinBox):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("gammaControl")
        self.setRange(*INT_RANGES["generation/gamma"])
        self.setSpecialValueText(AUTO_TEXT)
        self.setPrefix(PREFIX)
        self.setToolTip(GAMMA_TIP)
        # No label sits beside the box; its prefix alone is not a name a screen reader reads.
        self.setAccessibleName("γ, draft length")

    @property
    def setting(self) -> GammaSetting:
        """What the box says, as the engine's one γ type."""
        return AUTO if self.value() == 0 else fixed(self.value())

    def validate(self, text: str, pos: int) -> tuple[QValidator.State, str, int]:
        return self._judge(_typed(text)), text, pos

    @staticmethod
    def _judge(typed: str) -> QValidator.State:
        if not typed:
            return QValidator.State.Intermediate
        if not typed.isdigit() and AUTO_TEXT.lower().startswith(typed.lower()):
            whole = typed.lower() == AUTO_TEXT.lower()
            return QValidator.State.Acceptable if whole else QValidator.State.Intermediate
        try:
            setting = parse_gamma(typed)
        except InvalidSettingError:
            return QValidator.State.Invalid
        # "0" reads as off to parse_gamma: not a γ of this box (the Speculation box is).
        return QValidator.State.Invalid if setting.is_off else QValidator.State.Acceptable

    def valueFromText(self, text: str) -> int:
        typed = _typed(text)
        try:
            setting = parse_gamma(typed)
        except InvalidSettingError:
            return self.value()
        return 0 if setting.is_auto or setting.is_off else setting.length

    def fixup(self, text: str) -> str:
        typed = _typed(text)
        if typed and AUTO_TEXT.lower().startswith(typed.lower()) and not typed.isdigit():
            return AUTO_TEXT
        return text


def _typed(text: str) -> str:
    return text.removeprefix(PREFIX).strip()
