"""The γ setting: one parser, one printer, one range, the same in every front end."""

from __future__ import annotations

import pytest

from app.engine.config import GenerationConfig
from app.engine.gamma import (
    AUTO,
    AUTO_START_GAMMA,
    DEFAULT_GAMMA_SETTING,
    GAMMA_HELP,
    OFF,
    GammaSetting,
    fixed,
    parse_gamma,
)
from app.errors import InvalidSettingError
from app.metrics.cost_model import MAX_GAMMA
from app.server.schemas import n_max_of


@pytest.mark.parametrize(
    ("spelled", "setting"),
    [
        ("auto", AUTO),
        ("AUTO ", AUTO),
        ("off", OFF),
        ("0", OFF),
        (0, OFF),
        ("1", fixed(1)),
        (str(MAX_GAMMA), fixed(MAX_GAMMA)),
        (5, fixed(5)),
    ],
)
def test_every_spelling_parses_to_its_setting(spelled: str | int, setting: GammaSetting) -> None:
    assert parse_gamma(spelled) == setting


@pytest.mark.parametrize("setting", [AUTO, OFF, fixed(1), fixed(7), fixed(MAX_GAMMA)])
def test_the_printer_gives_back_what_the_parser_reads(setting: GammaSetting) -> None:
    assert parse_gamma(str(setting)) == setting


@pytest.mark.parametrize("bad", ["17", str(MAX_GAMMA + 1), "-1", -3, "five", "", "1.5", True])
def test_out_of_range_values_are_refused_with_the_one_sentence(bad: object) -> None:
    with pytest.raises(InvalidSettingError) as caught:
        parse_gamma(bad)  # type: ignore[arg-type]
    assert str(caught.value) == f"gamma must be {GAMMA_HELP}, got {bad!r}"


def test_auto_is_the_default_and_starts_where_it_always_did() -> None:
    assert DEFAULT_GAMMA_SETTING == AUTO
    assert GenerationConfig().gamma == AUTO
    assert AUTO.start == AUTO_START_GAMMA and fixed(3).start == 3 and OFF.start == 0


def test_the_server_spells_the_same_setting_as_llama_server_does() -> None:
    assert [n_max_of(s) for s in (AUTO, OFF, fixed(4))] == ["auto", 0, 4]
    assert [parse_gamma(n) for n in ("auto", 0, 4)] == [AUTO, OFF, fixed(4)]
