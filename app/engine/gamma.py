"""The γ setting: how many tokens a draft may propose per round, the same in every front end.

Three values and one spelling each, whether typed in the window's γ box, given as `--gamma` to
`generate`, `bench`, `serve` and `bench-server`, or sent as a request's `speculative.n_max`:

- `auto` (the default): γ auto chooses each round's length from measured acceptance and
  costs, and pauses speculation where it does not pay (app/engine/adaptive.py);
- `off` (also `0`): plain decoding, no draft work at all;
- `1` .. `16`: a fixed draft length, run as set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from app.errors import InvalidSettingError
from app.metrics.cost_model import MAX_GAMMA

# Where γ auto starts before it has measured anything, and the length a fixed setting falls
# back to nowhere else: every other front end spells its default as a GammaSetting.
AUTO_START_GAMMA: Final = 5

GammaKind = Literal["auto", "off", "fixed"]


@dataclass(frozen=True, slots=True)
class GammaSetting:
    kind: GammaKind
    length: int = 0  # the fixed draft length; 0 for auto and off

    def __post_init__(self) -> None:
        if self.kind == "fixed":
            _check_length(self.length)
        elif self.length != 0:
            raise InvalidSettingError(f"gamma {self.kind} takes no length, got {self.length}")

    @property
    def is_auto(self) -> bool:
        return self.kind == "auto"

    @property
    def is_off(self) -> bool:
        return self.kind == "off"

    @property
    def start(self) -> int:
        """The first round's draft length: the fixed one, or auto's starting point."""
        if self.kind == "fixed":
            return self.length
        return AUTO_START_GAMMA if self.kind == "auto" else 0

    def __str__(self) -> str:
        return str(self.length) if self.kind == "fixed" else self.kind


AUTO: Final = GammaSetting("auto")
OFF: Final = GammaSetting("off")
DEFAULT_GAMMA_SETTING: Final = AUTO

GAMMA_HELP: Final = f"'auto' (the default), 'off' (or 0), or a fixed draft length 1..{MAX_GAMMA}"


def fixed(length: int) -> GammaSetting:
    return GammaSetting("fixed", length)


def _range_error(value: object) -> InvalidSettingError:
    return InvalidSettingError(f"gamma must be {GAMMA_HELP}, got {value!r}")


def _check_length(length: int) -> None:
    if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= MAX_GAMMA:
        raise _range_error(length)


def parse_gamma(value: str | int | GammaSetting) -> GammaSetting:
    """The one parser: `auto`, `off`, `0`..`16` (text or a JSON integer); anything else is
    refused with the one sentence every front end shows."""
    if isinstance(value, GammaSetting):
        return value
    if isinstance(value, bool):
        raise _range_error(value)
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        text = value.strip().lower()
        if text in ("auto", "off"):
            return AUTO if text == "auto" else OFF
        try:
            number = int(text)
        except ValueError:
            raise _range_error(value) from None
    else:
        raise _range_error(value)
    if number == 0:
        return OFF
    if not 1 <= number <= MAX_GAMMA:
        raise _range_error(value)
    return fixed(number)
