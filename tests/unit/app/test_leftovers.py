"""A scratch folder left by a process that was killed outright is removed when the next one
starts; a folder a live process owns, a link, or a name it did not make is never touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from app.cli.main import main
from app.leftovers import remove_orphaned_scratch_dirs, scratch_dir
from tests.helpers.partials import dead_pid

ROOT = Path(__file__).resolve().parents[3]

# `specchat serve`, killed outright (SIGKILL) while it loads its models: nothing of its own
# cleanup runs.
KILLED_WHILE_LOADING = """
import os, signal, sys
import app.cli.serve
from app.cli.main import main
app.cli.serve.load_runtime = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
main(["serve", "--target", sys.argv[1], "--port", "0"])
"""


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system's temporary folder, for this test alone."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX's")
def test_a_killed_serves_folder_is_removed_when_the_next_one_starts(
    temp_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = temp_root / "missing.gguf"
    env = {**os.environ, "TMPDIR": str(temp_root), "PYTHONPATH": str(ROOT)}
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_WHILE_LOADING, str(target)], env=env, check=False
    )
    assert killed.returncode == -signal.SIGKILL
    assert [p.name.startswith("specchat-") for p in temp_root.iterdir()] == [True]

    assert main(["serve", "--target", str(target), "--port", "0"]) == 1  # no such model
    assert "missing.gguf" in capsys.readouterr().err
    assert list(temp_root.iterdir()) == []  # the killed one's folder, and its own


def test_a_scratch_folder_is_named_by_its_process_and_removed_on_cleanup(
    temp_root: Path,
) -> None:
    scratch = scratch_dir("serve")
    folder = Path(scratch.name)
    assert folder.parent == temp_root
    assert folder.name.startswith(f"specchat-serve-{os.getpid()}-")
    scratch.cleanup()
    assert not folder.exists()


@pytest.mark.skipif(os.name != "posix", reason="elsewhere a process cannot be asked if it ended")
def test_only_this_users_folders_of_ended_processes_are_removed(temp_root: Path) -> None:
    gone = temp_root / f"specchat-serve-{dead_pid()}-abc123_x"
    (gone / "inside").mkdir(parents=True)
    live = temp_root / f"specchat-bench-{os.getpid()}-abc123_x"  # this very process
    live.mkdir()
    elsewhere = temp_root / "precious"
    elsewhere.mkdir()
    link = temp_root / f"specchat-serve-{dead_pid()}-link0000"
    link.symlink_to(elsewhere, target_is_directory=True)
    foreign = temp_root / f"specchat-{dead_pid()}"  # not a name scratch_dir makes
    foreign.mkdir()

    assert remove_orphaned_scratch_dirs() == [gone]
    assert not gone.exists()
    assert live.is_dir() and elsewhere.is_dir() and link.is_symlink() and foreign.is_dir()


def test_a_scratch_folders_kind_is_a_plain_word() -> None:
    with pytest.raises(ValueError, match="lower-case letters"):
        scratch_dir("serve-1")
