"""Preferences: one defaults table, typed reads, change signals only on change, persistence."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings
from pytestqt.qtbot import QtBot

import ui.main
from app.metrics.cost_model import MAX_GAMMA
from ui.settings import (
    DEFAULTS,
    FLOAT_RANGES,
    INT_RANGES,
    Settings,
    SettingsFileError,
    settings_file,
)
from ui.widgets.settings_panel import SettingsPanel
from ui.window.generation_settings import generation_config


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


OUT_OF_RANGE = (
    "[models]\nn_ctx=99999999999\nn_threads=-3\n"
    "[generation]\nseed=3000000000\ngamma=99\ntop_p=-0.5\nmax_tokens=0\ntemperature=nan\n"
    "[server]\nport=99999\n"
)


def test_a_hand_edited_number_out_of_range_reads_as_the_default(
    tmp_path: Path, qtbot: QtBot
) -> None:
    """What the window shows is what a reply uses, and no control is handed a number it
    cannot hold."""
    path = tmp_path / "s.ini"
    path.write_text(OUT_OF_RANGE)
    s = make(path)
    for key in (
        "models/n_ctx",
        "models/n_threads",
        "generation/seed",
        "generation/gamma",
        "generation/max_tokens",
        "server/port",
    ):
        assert s.get_int(key) == DEFAULTS[key], key
    for key in ("generation/top_p", "generation/temperature"):
        assert s.get_float(key) == DEFAULTS[key], key
    # The edges themselves are values like any other.
    s.set("generation/gamma", MAX_GAMMA)
    s.set("generation/top_p", 0.0)  # the top token alone, as the engine takes it
    assert (s.get_int("generation/gamma"), s.get_float("generation/top_p")) == (MAX_GAMMA, 0.0)


def test_the_panel_opens_on_such_a_file_and_offers_exactly_the_stored_ranges(
    tmp_path: Path, qtbot: QtBot
) -> None:
    path = tmp_path / "s.ini"
    path.write_text(OUT_OF_RANGE)
    settings = make(path)
    panel = SettingsPanel(settings)  # a 32-bit spin box handed 99999999999 aborted the app
    qtbot.addWidget(panel)
    assert panel.context.value() == DEFAULTS["models/n_ctx"]
    config = generation_config(settings)  # gamma=99 made every Send raise
    assert config.gamma.is_auto and config.max_tokens == DEFAULTS["generation/max_tokens"]
    boxes = {
        "models/n_ctx": panel.context,
        "models/n_threads": panel.threads,
        "models/prompt_cache_mib": panel.prompt_cache,
        "models/target_gpu_layers": panel.target_layers,
        "models/draft_gpu_layers": panel.draft_layers,
        "generation/top_k": panel.top_k,
        "generation/seed": panel.seed,
        "generation/max_tokens": panel.max_tokens,
        "generation/temperature": panel.temperature,
        "generation/top_p": panel.top_p,
    }
    for key, box in boxes.items():
        assert (box.minimum(), box.maximum()) == (INT_RANGES | FLOAT_RANGES)[key], key


def test_a_top_p_of_0_reaches_the_engine_as_its_top_token_alone(
    tmp_path: Path, qtbot: QtBot
) -> None:
    """The engine takes top-p in [0, 1] (0: the most likely token alone); the window offers the
    same range, and says what 0 means."""
    settings = make(tmp_path / "s.ini")
    settings.set("generation/top_p", 0.0)
    config = generation_config(settings)
    config.validate()
    assert config.sampling.top_p == 0.0
    panel = SettingsPanel(settings)
    qtbot.addWidget(panel)
    assert panel.top_p.value() == 0.0 and panel.top_p.text() == "0 (top token)"


def test_default_location_is_the_data_folder(isolated_data_dir: Path, qtbot: QtBot) -> None:
    assert settings_file() == isolated_data_dir / "settings.ini"
    Settings().set("generation/gamma", 3)
    Settings().sync()
    assert "gamma=3" in (isolated_data_dir / "settings.ini").read_text()


def test_a_change_is_written_soon_and_a_refused_write_is_said_once(
    tmp_path: Path, qtbot: QtBot
) -> None:
    """The file is written shortly after a change, not only at close; a write the disk refuses
    (here a folder where the file should be, as a full disk refuses it) is said once, not at
    every change, and again only after a write succeeded."""
    path = tmp_path / "s.ini"
    s = make(path)
    s.set("generation/gamma", 7)
    qtbot.waitUntil(lambda: path.exists() and "gamma=7" in path.read_text(), timeout=5000)

    blocked = tmp_path / "blocked.ini"
    blocked.mkdir()
    refused = make(blocked)
    said: list[str] = []
    refused.saveFailed.connect(said.append)
    with qtbot.waitSignal(refused.saveFailed, timeout=5000):
        refused.set("generation/gamma", 5)
    refused.set("generation/gamma", 6)
    assert not refused.sync()
    assert len(said) == 1 and str(blocked) in said[0] and "\n" not in said[0]


def test_a_folder_in_place_of_the_settings_file_is_one_sentence(
    isolated_data_dir: Path, qtbot: QtBot
) -> None:
    settings_file().mkdir()
    with pytest.raises(SettingsFileError) as raised:
        Settings()
    assert str(settings_file()) in str(raised.value) and "\n" not in str(raised.value)


def test_the_window_refuses_to_start_on_it_in_one_line(
    isolated_data_dir: Path,
    qtbot: QtBot,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings_file().mkdir()
    shown: list[str] = []
    monkeypatch.setattr(
        ui.main.QMessageBox, "critical", lambda _parent, _title, text: shown.append(text)
    )
    assert ui.main.run_app() == 1
    err = capsys.readouterr().err
    assert err.startswith("error: Cannot open the settings file") and err.count("\n") == 1
    assert shown and "settings file" in shown[0]


def test_a_hand_edited_line_qt_cannot_read_is_no_refused_write(
    tmp_path: Path, qtbot: QtBot
) -> None:
    """QSettings reports a line without "=" as a format error, and keeps reporting it: the file
    is written all the same, so nothing is said."""
    path = tmp_path / "s.ini"
    path.write_text("[generation]\nthis line has no equals sign\ngamma=3\n", encoding="utf-8")
    s = make(path)
    said: list[str] = []
    s.saveFailed.connect(said.append)
    s.set("generation/gamma", 7)
    assert s.sync()
    assert said == [] and make(path).get_int("generation/gamma") == 7


def test_cpu_threads_go_no_higher_than_the_machine_runs_at_once(tmp_path: Path) -> None:
    # 256 on a 2-core machine wrote 0.3 tokens/s where 2 wrote 14.
    cores = os.cpu_count() or 1
    assert INT_RANGES["models/n_threads"] == (0, cores)
    settings = make(tmp_path / "s.ini")
    settings.set("models/n_threads", cores + 1)
    assert settings.get_int("models/n_threads") == 0  # Auto, as any value out of range reads
