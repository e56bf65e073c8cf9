"""make-draft's guards before llama.cpp runs: free disk space, and stale partial files."""

from __future__ import annotations

import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import pytest

from models import quantize
from models.partial import partial_path, remove_stale_partials
from tests.helpers.model_files import write_tiny_gguf

_Usage = namedtuple("_Usage", "total used free")


def test_quantize_refuses_up_front_when_the_disk_has_too_little_space(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = write_tiny_gguf(tmp_path / "src.gguf", n_layers=2, tensor_elements=4096)
    monkeypatch.setattr(quantize.shutil, "disk_usage", lambda _p: _Usage(10**9, 10**9, 10))
    dst = tmp_path / "out" / "draft.gguf"
    with pytest.raises(quantize.NoDiskSpaceError, match="not enough disk space in"):
        quantize.quantize_gguf(src, dst, "Q8_0")
    assert not dst.exists()
    assert not any(p.name.endswith(".partial") for p in dst.parent.iterdir())


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


def test_stale_partials_of_dead_writers_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    stale = tmp_path / f"model.Q4_0.gguf.{_dead_pid()}-140.partial"
    stale.write_bytes(b"half")
    live = partial_path(tmp_path / "model.Q8_0.gguf")  # this process: still running
    live.write_bytes(b"half")
    download = tmp_path / ".model.gguf.abc.incomplete"  # a download's, resumable: not ours
    download.write_bytes(b"half")
    assert remove_stale_partials(tmp_path) == [stale]
    assert not stale.exists() and live.exists() and download.exists()
