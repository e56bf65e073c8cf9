"""A file replaced through app/durable.py is the old one whole or the new one whole, after an
error, a crash or a power cut, and leaves no temporary copy behind."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from app.durable import replace_atomically, replace_file


class _RefusedError(Exception):
    pass


def _write(text: str) -> Callable[[Path], object]:
    return lambda temporary: temporary.write_text(text, encoding="utf-8")


def test_the_new_content_replaces_the_old_and_no_copy_is_left(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text("old", encoding="utf-8")
    seen: list[Path] = []

    def write(temporary: Path) -> None:
        seen.append(temporary)
        temporary.write_text("new", encoding="utf-8")

    replace_atomically(path, write)
    assert path.read_text(encoding="utf-8") == "new"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    [temporary] = seen
    assert temporary.parent == tmp_path and temporary != path  # a rename stays on one disk


@pytest.mark.parametrize("error", [_RefusedError("disk full"), KeyboardInterrupt()])
def test_a_write_that_fails_leaves_the_old_file_whole_and_no_copy(
    tmp_path: Path, error: BaseException
) -> None:
    path = tmp_path / "report.json"
    path.write_text("old", encoding="utf-8")

    def half_then_fail(temporary: Path) -> None:
        temporary.write_text("ne", encoding="utf-8")
        raise error

    with pytest.raises(type(error)):
        replace_atomically(path, half_then_fail)
    assert path.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_the_callers_temporary_name_is_written_and_removed_on_failure(tmp_path: Path) -> None:
    """Callers whose killed runs' leftovers are cleaned by name (models/partial.py) choose it."""
    path = tmp_path / "model.gguf"
    temporary = tmp_path / "model.gguf.123-4.partial"
    written: list[Path] = []

    def write(target: Path) -> None:
        written.append(target)
        target.write_bytes(b"half")
        raise _RefusedError

    with pytest.raises(_RefusedError):
        replace_atomically(path, write, temporary=temporary)
    assert written == [temporary]
    assert not temporary.exists() and not path.exists()


def test_a_rename_that_fails_removes_the_copy(tmp_path: Path) -> None:
    path = tmp_path / "taken"
    path.mkdir()
    (path / "inside").touch()  # a folder that is not empty: no file is renamed over it
    with pytest.raises(OSError):
        replace_atomically(path, _write("new"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_a_copy_that_cannot_be_removed_does_not_hide_why_the_write_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse_unlink(self: Path, missing_ok: bool = False) -> None:
        raise PermissionError("read-only folder")

    def fail(temporary: Path) -> None:
        temporary.write_text("half", encoding="utf-8")
        raise _RefusedError("disk full")

    monkeypatch.setattr(Path, "unlink", refuse_unlink)
    with pytest.raises(_RefusedError, match="disk full"):
        replace_atomically(tmp_path / "report.json", fail)


@pytest.mark.skipif(os.name != "posix", reason="only POSIX folders can be synced")
def test_the_file_is_on_the_disk_before_the_rename_and_the_rename_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Synced after the rename, a file could be found empty after a power cut; the rename lives
    in the folder, and until the folder is synced a power cut can undo it."""
    path = tmp_path / "report.json"
    path.write_text("old", encoding="utf-8")
    calls: list[tuple[str, int]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        st = os.fstat(fd)
        calls.append(("fsync folder" if stat.S_ISDIR(st.st_mode) else "fsync", st.st_ino))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        calls.append(("replace", os.stat(src).st_ino))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    replace_atomically(path, _write("new"))
    new, folder = path.stat().st_ino, tmp_path.stat().st_ino
    assert calls == [("fsync", new), ("replace", new), ("fsync folder", folder)]


def test_a_replaced_file_keeps_the_permissions_the_old_one_had(tmp_path: Path) -> None:
    """An exported chat the user made private stays private when exported again over it."""
    path = tmp_path / "chat.md"
    path.write_text("old", encoding="utf-8")
    path.chmod(0o600)
    previous = os.umask(0o022)
    try:
        replace_file(path, lambda temporary: temporary.write_text("new", encoding="utf-8"))
    finally:
        os.umask(previous)
    assert path.read_text(encoding="utf-8") == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_new_file_gets_the_default_permissions(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    previous = os.umask(0o022)
    try:
        replace_file(path, lambda temporary: temporary.write_text("{}", encoding="utf-8"))
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
