"""The demo models' progress on stderr: one line per report, a repeated report not reprinted."""

from __future__ import annotations

import pytest

from app.cli.args import _progress_printer


def test_a_report_repeating_the_last_line_prints_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    show = _progress_printer()
    show(0, 200, "writing a.gguf: 0 B of about 100 B")
    show(100, 200, "writing a.gguf: 100 B of about 100 B")
    show(100, 200, "writing a.gguf: 100 B of about 100 B")  # the file's end, after its last poll
    show(100, 200, "writing b.gguf: 0 B of about 100 B")
    show(200, 200, "demo models ready")

    assert capsys.readouterr().err.splitlines() == [
        "[  0%] writing a.gguf: 0 B of about 100 B",
        "[ 50%] writing a.gguf: 100 B of about 100 B",
        "[ 50%] writing b.gguf: 0 B of about 100 B",
        "[100%] demo models ready",
    ]


def test_each_printer_starts_afresh(capsys: pytest.CaptureFixture[str]) -> None:
    _progress_printer()(1, 2, "half")
    _progress_printer()(1, 2, "half")

    assert capsys.readouterr().err.splitlines() == ["[ 50%] half", "[ 50%] half"]
