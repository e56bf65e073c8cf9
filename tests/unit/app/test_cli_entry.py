"""A Ctrl-C before main's own handlers are in place (while the engine's modules import, or the
command line is checked) ends the command like one after them: one line, status 130."""

from __future__ import annotations

import pytest

import app.cli.main
from app.cli.entry import run


def test_a_ctrl_c_before_mains_handlers_is_one_line_and_status_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted() -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(app.cli.main, "main", interrupted)
    assert run() == 130
    assert capsys.readouterr().err == "error: interrupted\n"


def test_the_command_runs_main_and_returns_its_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(app.cli.main, "main", lambda: 7)
    assert run() == 7
