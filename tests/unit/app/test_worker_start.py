"""A worker tells its user how to print the key its clients need (with a passphrase, the same
passphrase: `--show-key` alone prints the stored key, which that worker refuses), and keeps the
weights it caches private."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from app.cli.main import main
from app.cli.worker import _print_key
from app.errors import InvalidSettingError
from app.llama import rpc
from app.llama.rpc_identity import WORKER_KEY_ENV, load_identity


def test_a_worker_on_a_passphrase_points_at_the_passphrases_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    load_identity(tmp_path)  # the stored key and the certificate exist already
    _print_key(load_identity(tmp_path, "correct horse battery staple"), "127.0.0.1", 50601)
    err = capsys.readouterr().err
    assert f"--show-key` with the same --key or {WORKER_KEY_ENV}" in err


def test_a_worker_on_its_stored_key_points_at_show_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    load_identity(tmp_path)
    _print_key(load_identity(tmp_path), "127.0.0.1", 50601)
    err = capsys.readouterr().err
    assert "`specchat worker --show-key` prints it" in err and "--key" not in err


def _start_until_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    def stop_here(_device: str) -> None:
        raise InvalidSettingError("no device in this test")

    monkeypatch.setattr(rpc, "require_rpc", lambda: None)
    monkeypatch.setattr(rpc, "default_worker_device", lambda: "CPU")
    monkeypatch.setattr(rpc, "find_device", stop_here)


def test_a_new_weights_cache_is_made_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # llama.cpp loads a cached tensor by its name without checking it: a cache others may
    # write to would let them change the weights every client computes with.
    cache = tmp_path / "cache"
    _start_until_the_device(monkeypatch)
    assert main(["worker", "--cache", str(cache)]) == 1
    assert "no device in this test" in capsys.readouterr().err  # got past the cache
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700


def test_a_weights_cache_others_may_write_to_is_refused_and_left_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    _start_until_the_device(monkeypatch)
    assert main(["worker", "--cache", str(shared)]) == 1
    assert "others may write to" in capsys.readouterr().err
    assert stat.S_IMODE(shared.stat().st_mode) == 0o777  # not changed behind its owner's back


def test_a_weights_cache_of_ones_own_is_used_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    os.chmod(mine, 0o755)  # a home folder, say: readable by others, theirs to leave so
    _start_until_the_device(monkeypatch)
    assert main(["worker", "--cache", str(mine)]) == 1
    assert "no device in this test" in capsys.readouterr().err
    assert stat.S_IMODE(mine.stat().st_mode) == 0o755
