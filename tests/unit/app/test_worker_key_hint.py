"""A worker tells its user how to print the key its clients need: with a passphrase, the same
passphrase, since `--show-key` alone prints the stored key, which that worker refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.worker import _print_key
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
