"""A data folder that cannot be used (a file in the way, a folder the system refuses) ends any
command in one `error: cannot use data folder ...` line and exit status 1, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.main import main


@pytest.mark.parametrize(
    ("folder", "reason"),
    [
        ("a-file/data", "Not a directory"),
        ("/proc/self", "Operation not permitted"),
        ("/proc/nope", "No such file or directory"),
    ],
)
def test_an_unusable_data_folder_is_one_error_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    folder: str,
    reason: str,
) -> None:
    (tmp_path / "a-file").write_text("in the way", encoding="utf-8")
    path = tmp_path / folder  # an absolute folder replaces tmp_path
    monkeypatch.setenv("SPECCHAT_DATA_DIR", str(path))
    # The demo models live in the data folder: asking for them is the first thing to need it.
    assert main(["generate", "--target", "demo", "--prompt", "hi"]) == 1
    assert capsys.readouterr().err == f"error: cannot use data folder {path}: {reason}\n"
