"""The model load check (models/probe.py) with its child process faked: the child is told the
file the parent checked, a verdict that the file is missing is never remembered against a file
that is there, and the check still answers when the data folder cannot be used."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

import models.probe
from app.errors import ModelLoadError
from models.discovery import discover_models
from models.probe import CHECKS_FILE, ensure_loadable, file_identity, probe_child
from tests.helpers.model_files import write_tiny_gguf


class FakeChild:
    """Stands in for `python -m models.probe PATH`, answering as the real child does: it looks
    for PATH from its own working folder, and a file it cannot find is no verdict on a file."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def __call__(self, command: list[str], *, cwd: str, **_kw: Any) -> Any:
        path = command[-1]
        self.paths.append(path)
        if (Path(cwd) / path).is_file():
            verdict: dict[str, object] = {"ok": True, "reason": "loads"}
        else:
            verdict = {"ok": False, "reason": "no such file", "lasting": False}
        return subprocess.CompletedProcess(command, 0, json.dumps(verdict) + "\n", "")


@pytest.fixture
def child(monkeypatch: pytest.MonkeyPatch) -> FakeChild:
    fake = FakeChild()
    monkeypatch.setattr(subprocess, "run", fake)
    return fake


def _checks(data_dir: Path) -> dict[str, Any]:
    path = data_dir / CHECKS_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def test_a_relative_path_reaches_the_child_as_the_file_the_parent_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, child: FakeChild, isolated_data_dir: Path
) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    monkeypatch.chdir(tmp_path)

    ensure_loadable("tiny.gguf")  # the child runs in the code's folder, not this one

    assert child.paths == [str(model)]
    assert [v["ok"] for v in _checks(isolated_data_dir).values()] == [True]


def test_a_remembered_no_such_file_does_not_refuse_a_file_that_is_there(
    tmp_path: Path, child: FakeChild, isolated_data_dir: Path
) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    # What earlier versions remembered after checking a relative path in the wrong folder.
    models.probe._save_check(file_identity(model), False, "no such file")

    ensure_loadable(model)

    assert child.paths == [str(model)]  # checked again rather than refused
    assert [v["ok"] for v in _checks(isolated_data_dir).values()] == [True]


def test_a_child_that_cannot_find_the_file_is_not_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_data_dir: Path
) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    missing = {"ok": False, "reason": "no such file", "lasting": False}

    def replaced_meanwhile(command: list[str], **_kw: Any) -> Any:
        return subprocess.CompletedProcess(command, 0, json.dumps(missing) + "\n", "")

    monkeypatch.setattr(subprocess, "run", replaced_meanwhile)
    with pytest.raises(ModelLoadError, match="no such file"):
        ensure_loadable(model)
    assert _checks(isolated_data_dir) == {}


def test_the_child_says_a_missing_file_is_no_lasting_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert probe_child(str(tmp_path / "gone.gguf")) == 0
    verdict = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert verdict == {"ok": False, "reason": "no such file", "lasting": False}


def test_a_model_is_checked_without_a_usable_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, child: FakeChild
) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    blocker = tmp_path / "a-file"
    blocker.write_text("in the way", encoding="utf-8")
    monkeypatch.setenv("SPECCHAT_DATA_DIR", str(blocker / "data"))

    ensure_loadable(model)  # only costs a check again next time

    assert child.paths == [str(model)]
    assert not os.path.exists(blocker / "data")


def test_a_verdict_the_disk_refuses_is_not_remembered_and_leaves_no_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, child: FakeChild, isolated_data_dir: Path
) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf")

    def full_disk(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    ensure_loadable(model)  # only costs a check again next time

    assert child.paths == [str(model)]
    assert not list(isolated_data_dir.glob("*model-checks*"))


def test_a_scan_reads_the_remembered_checks_once_and_sees_a_newer_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_data_dir: Path
) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    files = [write_tiny_gguf(folder / f"tiny-{n}.gguf") for n in range(6)]
    models.probe._save_check(file_identity(files[0]), False, "llama.cpp aborted")
    reads: list[Path] = []
    real_read_text = Path.read_text

    def counted(self: Path, *args: Any, **kwargs: Any) -> str:
        if self.name == CHECKS_FILE:
            reads.append(self)
        return real_read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counted)

    def scan() -> list[Any]:
        return discover_models(
            [folder], include_app=False, include_hf_cache=False, include_lmstudio=False
        )

    first = scan()
    assert len(reads) <= 1  # not once per file
    assert [e.load_failure is not None for e in first] == [True] + [False] * 5

    # Another process remembers a failure: the next scan sees it.
    checks = _checks(isolated_data_dir)
    checks[file_identity(files[1])] = {"ok": False, "reason": "llama.cpp crashed"}
    (isolated_data_dir / CHECKS_FILE).write_text(json.dumps(checks), encoding="utf-8")
    again = scan()
    assert [e.load_failure is not None for e in again] == [True, True] + [False] * 4
