"""A data folder that cannot be used (a file in the way, a folder the system refuses) ends any
command in one `error: cannot use data folder ...` line and exit status 1, not a traceback."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from app.cli.main import main
from app.errors import SpecChatError
from app.paths import demo_models_dir, make_private_dir
from models.demo import ensure_demo_models
from tests.unit.models.test_quantize_guards import read_only
from ui.messages import describe


@pytest.mark.parametrize(
    ("folder", "reason"),
    [
        ("a-file/data", "a file is in the way (it, or a folder above it, is a file)"),
        ("a-file", "a file is in the way (it, or a folder above it, is a file)"),
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
    # make-draft finds its default output folder while its flags are checked.
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    assert main(["models", "make-draft", str(model), "--type", "Q4_0"]) == 1
    assert capsys.readouterr().err == f"error: cannot use data folder {path}: {reason}\n"


def test_a_read_only_demo_folder_is_one_line_naming_it_in_the_cli_and_the_window(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # models/demo exists (mkdir succeeds) but its file system refuses new files: deriving the
    # demo models used to blame the model, then a traceback from removing the partial file.
    folder = demo_models_dir()
    read_only(monkeypatch, folder)
    line = f"cannot use data folder {folder}: Read-only file system"
    assert main(["generate", "--target", "demo", "--prompt", "hi"]) == 1
    assert capsys.readouterr().err == f"error: {line}\n"
    with pytest.raises(SpecChatError) as caught:  # what the window's engine worker gets
        ensure_demo_models()
    assert describe(caught.value) == f"C{line[1:]}."


def test_a_folder_its_owner_made_read_only_stays_so_but_loses_others_access(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    folder.chmod(0o555)
    make_private_dir(folder)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o500
    folder.chmod(0o755)
    make_private_dir(folder)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
