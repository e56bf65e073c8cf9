"""An RPC worker reached unencrypted is warned about however the downgrade was asked for: plain@
on the command line, or SPECCHAT_RPC_KEY=plain for the workers given without a key."""

from __future__ import annotations

import pytest

from app.cli.rpc_options import _workers
from app.llama.rpc_keys import RPC_KEY_ENV


def test_plain_in_the_environment_is_warned_about_as_plain_at_is(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RPC_KEY_ENV, "PLAIN")
    assert _workers("127.0.0.1:50601") == ("127.0.0.1:50601",)
    err = capsys.readouterr().err
    assert "127.0.0.1:50601 is reached without a key or encryption" in err
    assert f"({RPC_KEY_ENV}=plain)" in err


def test_a_keyed_worker_is_not_warned_about(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(RPC_KEY_ENV, raising=False)
    _workers("127.0.0.1:50601")
    assert capsys.readouterr().err == ""
    _workers("plain@127.0.0.1:50602")
    assert "127.0.0.1:50602 is reached without a key" in capsys.readouterr().err
