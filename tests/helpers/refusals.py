"""What a refused write looks like to a test: one `error:` line on stderr, and a disk that fills
half-way through a write."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The one `error:` line a command printed on stderr; never a traceback."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("error: ")
    return lines[0]


def fill_disk_mid_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on Path.write_text writes half its text, then fails as a full disk does."""
    write_text = Path.write_text

    def full_disk(path: Path, text: str, *args: Any, **kwargs: Any) -> int:
        write_text(path, text[: len(text) // 2], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
