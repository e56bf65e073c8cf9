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


def test_the_weights_cache_is_made_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # llama.cpp loads a cached tensor by its name without checking it: a cache others may
    # write to would let them change the weights every client computes with.
    cache = tmp_path / "shared-cache"
    cache.mkdir(mode=0o777)
    os.chmod(cache, 0o777)

    def stop_here(_device: str) -> None:
        raise InvalidSettingError("no device in this test")

    monkeypatch.setattr(rpc, "require_rpc", lambda: None)
    monkeypatch.setattr(rpc, "default_worker_device", lambda: "CPU")
    monkeypatch.setattr(rpc, "find_device", stop_here)
    assert main(["worker", "--cache", str(cache)]) == 1
    assert "no device in this test" in capsys.readouterr().err
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
