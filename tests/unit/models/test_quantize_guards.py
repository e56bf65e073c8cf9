"""make-draft's guards before llama.cpp runs: a folder it can write in, free disk space, and
stale partial files."""

from __future__ import annotations

import errno
import os
from collections import namedtuple
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.errors import ModelLoadError, SpecChatError
from app.paths import DataFolderError, models_dir
from models import quantize
from models.partial import partial_path, remove_stale_partials
from tests.helpers.model_files import write_tiny_gguf
from tests.helpers.partials import stale_partial

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


def read_only(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Make creating files in `folder` fail as on a read-only mount (root ignores chmod)."""
    real_open: Callable[..., int] = os.open

    def refusing_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(path).parent == folder and flags & os.O_CREAT:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)


@pytest.mark.parametrize("free", [10, 10**12])
def test_a_read_only_folder_is_named_before_llama_cpp_runs_even_when_nearly_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free: int
) -> None:
    src = write_tiny_gguf(tmp_path / "src.gguf", n_layers=2, tensor_elements=4096)
    out = models_dir() / "demo"
    out.mkdir(parents=True)
    read_only(monkeypatch, out)
    # Read-only is the reason to give even where the space check would also refuse.
    monkeypatch.setattr(quantize.shutil, "disk_usage", lambda _p: _Usage(10**12, 0, free))
    with pytest.raises(DataFolderError) as caught:
        quantize.quantize_gguf(src, out / "draft.gguf", "Q8_0")
    assert str(caught.value) == f"cannot use data folder {out}: Read-only file system"
    assert not any(out.iterdir())


def test_a_read_only_folder_outside_the_data_folder_is_not_called_the_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`models make-draft --out` anywhere: refused as plainly, in its own words."""
    src = write_tiny_gguf(tmp_path / "src.gguf", n_layers=2, tensor_elements=4096)
    out = tmp_path / "elsewhere"
    out.mkdir()
    read_only(monkeypatch, out)
    with pytest.raises(SpecChatError) as caught:
        quantize.quantize_gguf(src, out / "draft.gguf", "Q8_0")
    assert not isinstance(caught.value, DataFolderError)
    assert str(caught.value) == f"cannot write in {out}: Read-only file system"


def test_a_partial_file_left_by_this_same_thread_does_not_block_the_next_try(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = write_tiny_gguf(tmp_path / "src.gguf", n_layers=2, tensor_elements=4096)
    dst = tmp_path / "out" / "draft.gguf"
    dst.parent.mkdir()
    partial_path(dst).write_bytes(b"left by a cleanup that failed")  # this pid and thread
    monkeypatch.setattr(quantize, "_run_watched", lambda *_a: 1)  # llama.cpp's failure code
    with pytest.raises(ModelLoadError):  # llama.cpp's own failure, not "File exists"
        quantize.quantize_gguf(src, dst, "Q8_0")


def test_a_failed_quantize_is_reported_even_when_its_partial_file_cannot_be_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = write_tiny_gguf(tmp_path / "src.gguf", n_layers=2, tensor_elements=4096)
    monkeypatch.setattr(quantize, "_run_watched", lambda *_a: 1)  # llama.cpp's failure code

    def refuse(self: Path, missing_ok: bool = False) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))

    monkeypatch.setattr(Path, "unlink", refuse)
    with pytest.raises(ModelLoadError, match="could not quantize it to Q8_0"):
        quantize.quantize_gguf(src, tmp_path / "out" / "draft.gguf", "Q8_0")


def test_stale_partials_of_dead_writers_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    stale = stale_partial(tmp_path / "model.Q4_0.gguf")
    live = partial_path(tmp_path / "model.Q8_0.gguf")  # this process: still running
    live.write_bytes(b"half")
    download = tmp_path / ".model.gguf.abc.incomplete"  # a download's, resumable: not ours
    download.write_bytes(b"half")
    assert remove_stale_partials(tmp_path) == [stale]
    assert not stale.exists() and live.exists() and download.exists()
