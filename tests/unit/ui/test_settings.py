"""Preferences: one defaults table, typed reads, change signals only on change, persistence."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QSettings
from pytestqt.qtbot import QtBot

from ui.settings import DEFAULTS, Settings, settings_file


def make(path: Path) -> Settings:
    return Settings(QSettings(str(path), QSettings.Format.IniFormat))


def test_defaults_come_from_the_table(tmp_path: Path, qtbot: QtBot) -> None:
    s = make(tmp_path / "s.ini")
    assert s.get_bool("generation/speculation") is True
    assert s.get_int("generation/gamma") == DEFAULTS["generation/gamma"]
    assert s.get_float("generation/temperature") == 0.0
    assert s.get_str("models/target") == ""
    assert s.get_list("models/extra_files") == []
    with pytest.raises(TypeError):
        s.get_int("generation/temperature")
    with pytest.raises(KeyError):
        s.set("no/such/key", 1)


def test_values_survive_a_new_instance_with_their_types(tmp_path: Path, qtbot: QtBot) -> None:
    path = tmp_path / "s.ini"
    s = make(path)
    s.set("generation/speculation", False)
    s.set("generation/gamma", 0)
    s.set("generation/top_p", 0.9)
    s.set("models/extra_files", ["/a.gguf"])
    s.set("generation/system_prompt", "Be brief.")
    s.sync()
    again = make(path)
    assert again.get_bool("generation/speculation") is False
    assert again.get_int("generation/gamma") == 0
    assert again.get_float("generation/top_p") == pytest.approx(0.9)
    assert again.get_list("models/extra_files") == ["/a.gguf"]
    assert again.get_str("generation/system_prompt") == "Be brief."


def test_changed_fires_once_per_real_change(tmp_path: Path, qtbot: QtBot) -> None:
    s = make(tmp_path / "s.ini")
    seen: list[str] = []
    s.changed.connect(seen.append)
    s.set("generation/gamma", 7)
    s.set("generation/gamma", 7)
    s.set("generation/gamma", 5)
    assert seen == ["generation/gamma", "generation/gamma"]


def test_a_garbled_value_falls_back_to_the_default(tmp_path: Path, qtbot: QtBot) -> None:
    path = tmp_path / "s.ini"
    path.write_text("[generation]\ngamma=lots\nspeculation=false\n")
    s = make(path)
    assert s.get_int("generation/gamma") == DEFAULTS["generation/gamma"]
    assert s.get_bool("generation/speculation") is False


def test_default_location_is_the_data_folder(isolated_data_dir: Path, qtbot: QtBot) -> None:
    assert settings_file() == isolated_data_dir / "settings.ini"
    Settings().set("generation/gamma", 3)
    Settings().sync()
    assert "gamma=3" in (isolated_data_dir / "settings.ini").read_text()
