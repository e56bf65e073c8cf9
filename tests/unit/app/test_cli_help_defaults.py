"""--help gives each default as a user would type it, never a Python repr, and says it once."""

from __future__ import annotations

import re

import pytest

from app.cli.main import main


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines anywhere


@pytest.mark.parametrize("command", ["generate", "bench", "serve"])
def test_defaults_read_as_typed(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(command, capsys)
    assert not re.search(r"default: [\[(]", text), text  # [True], ['auto'], ()


def test_bench_says_its_own_gamma_default_only(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help("bench", capsys)
    gamma = text.split("--gamma G[,G...]", 2)[2].split("--suffix", 1)[0]
    assert "(the default)" not in gamma and "(default 2,4,6,auto)" in gamma
    assert "side by side (default on)" in text and "side by side (default auto)" in text
