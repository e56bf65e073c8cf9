"""A reply written to a full disk ends in one `error: cannot write output: ...` line and exit
status 1, streamed or as JSON, and so do `--help` and `--version`; never a traceback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import app.cli.main
from app.cli.main import main
from app.engine.events import FinishEvent, TokenEvent
from tests.helpers.bench_data import result_from_rounds, seed_rounds

DEV_FULL = Path("/dev/full")


class _Session:
    def close(self) -> None:
        pass


@pytest.fixture
def replying(monkeypatch: pytest.MonkeyPatch) -> None:
    """generate with its model faked: a token, then the reply's end."""

    def job_events(*_args: Any) -> tuple[list[int], Iterator[object]]:
        finish = FinishEvent(result_from_rounds(seed_rounds()))
        return [], iter([TokenEvent(7, "Hello", False, 0), finish])

    monkeypatch.setattr(app.cli.main, "load_runtime", lambda *_a, **_k: _Session())
    monkeypatch.setattr(app.cli.main, "job_events", job_events)


@pytest.mark.skipif(not DEV_FULL.exists(), reason="no /dev/full here")
@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_a_reply_to_a_full_disk_is_one_error_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    replying: None,
    json_flag: list[str],
) -> None:
    with DEV_FULL.open("w", encoding="utf-8") as full:
        monkeypatch.setattr(sys, "stdout", full)
        code = main(
            ["generate", "--target", str(tmp_path / "t.gguf"), "--prompt", "hi", *json_flag]
        )
    assert code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[0] == "error: cannot write output: No space left on device"


@pytest.mark.skipif(not DEV_FULL.exists(), reason="no /dev/full here")
@pytest.mark.parametrize("argv", [["--version"], ["generate", "--help"], ["models", "--help"]])
def test_help_and_version_to_a_full_disk_are_one_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """argparse prints them and exits: the refused text must not vanish with exit status 0."""
    with DEV_FULL.open("w", encoding="utf-8") as full:
        monkeypatch.setattr(sys, "stdout", full)
        code = main(argv)
    assert code == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == ["error: cannot write output: No space left on device"]


def test_a_reply_with_stdout_closed_is_one_error_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    replying: None,
) -> None:
    monkeypatch.setattr(sys, "stdout", None)  # what Python gives a process started `>&-`
    code = main(["generate", "--target", str(tmp_path / "t.gguf"), "--prompt", "hi"])
    assert code == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == ["error: cannot write output: standard output is closed"]


def test_a_prompt_from_a_closed_stdin_is_one_error_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    replying: None,
) -> None:
    monkeypatch.setattr(sys, "stdin", None)  # what Python gives a process started `<&-`
    code = main(["generate", "--target", str(tmp_path / "t.gguf"), "--prompt-file", "-"])
    assert code == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines()[0].startswith("error: standard input is closed")
