"""Files the app wrote itself are read whole, and only as much memory as they hold is used."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from app.own_files import read_own_file


def test_a_small_file_is_read_without_setting_aside_the_bound(tmp_path: Path) -> None:
    path = tmp_path / ".deletions"
    path.write_bytes(b"stamp")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    # Room for this process as it is, not for a 2 GiB buffer on top of it.
    with open("/proc/self/statm", encoding="ascii") as statm:
        in_use = int(statm.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (in_use + 512 * 2**20, hard))
    try:
        assert read_own_file(path) == b"stamp"
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_own_file(tmp_path / "gone")
