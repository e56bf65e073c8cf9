"""Worker keys on paper: the token's format, passphrases, the stored identity, and how a key
given with an endpoint is remembered without travelling in the endpoint string."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from app.errors import InvalidSettingError
from app.llama import rpc, rpc_keys
from app.llama.rpc_identity import load_identity, worker_folder
from app.llama.rpc_token import WorkerToken, parse_token, secret_from_passphrase
from app.paths import DataFolderError
from tests.helpers.refusals import fill_disk_mid_write


def test_a_token_carries_the_secret_and_the_pin_in_one_word() -> None:
    token = WorkerToken(bytes(range(16)), bytes(range(16, 32)))
    text = str(token)
    assert text.startswith("sc1") and text.isalnum() and text == text.lower()
    assert parse_token(text) == token
    assert parse_token(f"  {text.upper()}\n") == token  # pasted with case or blanks changed


@pytest.mark.parametrize("text", ["", "sc1abc", "xx" + "a" * 53, "sc1" + "1" * 52])
def test_what_is_not_a_token_is_refused_in_words(text: str) -> None:
    with pytest.raises(InvalidSettingError) as caught:
        parse_token(text)
    assert "is not a worker key" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_refusal_never_repeats_a_whole_key() -> None:
    almost = str(WorkerToken(bytes(16), bytes(16)))[:-1]
    with pytest.raises(InvalidSettingError) as caught:
        parse_token(almost)
    assert almost not in str(caught.value)


def test_a_passphrase_is_a_stable_secret_of_the_key_size() -> None:
    one = secret_from_passphrase("correct horse battery staple")
    assert one == secret_from_passphrase("correct horse battery staple")
    assert one != secret_from_passphrase("correct horse battery stapler")
    assert len(one) == 16
    with pytest.raises(InvalidSettingError, match="at least 16 characters"):
        secret_from_passphrase("short")


def test_the_identity_is_made_once_then_read_back(tmp_path: Path) -> None:
    first = load_identity(tmp_path)
    again = load_identity(tmp_path)
    assert first.key_is_new and not again.key_is_new
    assert again.token == first.token
    given = load_identity(tmp_path, "a passphrase of my own")
    assert given.fingerprint == first.fingerprint and given.secret != first.secret
    (tmp_path / "tls.pem").unlink()
    renewed = load_identity(tmp_path)
    assert renewed.key_is_new and renewed.fingerprint != first.fingerprint


def test_a_first_start_cut_short_leaves_no_torn_identity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash or a full disk while the key is written leaves no key at all, so the next start
    makes one, rather than half a key that every start after refuses."""
    fill_disk_mid_write(monkeypatch)
    with pytest.raises(OSError, match="No space left on device"):
        load_identity(tmp_path)
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
    assert load_identity(tmp_path).key_is_new


def test_the_secrets_are_never_readable_by_others_even_while_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_text = Path.write_text
    written: list[tuple[str, int]] = []

    def watched(path: Path, text: str, *args: Any, **kwargs: Any) -> int:
        count = write_text(path, text, *args, **kwargs)
        written.append((path.name, path.stat().st_mode & 0o777))  # the secret is in it now
        return count

    monkeypatch.setattr(Path, "write_text", watched)
    umask = os.umask(0)  # a file created with the default mode would be world-readable
    try:
        load_identity(tmp_path)
    finally:
        os.umask(umask)
    assert len(written) == 2
    for name, mode in written:
        assert name.startswith((".key.", ".tls.pem.")) and mode == 0o600, written
    for name in ("key", "tls.pem"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600


def test_a_key_given_with_an_endpoint_is_remembered_and_stripped() -> None:
    token = str(WorkerToken(bytes(16), b"\x01" * 16))
    assert rpc.parse_endpoints(f"{token}@10.9.8.7:50052, plain@10.9.8.6:50052") == (
        "10.9.8.7:50052",
        "10.9.8.6:50052",
    )
    assert rpc_keys.key_for("10.9.8.7:50052") == token
    assert rpc_keys.token_for("10.9.8.6:50052") is None
    assert rpc.connect_spec("10.9.8.7:50052") == f"{token}@10.9.8.7:50052"


def test_the_environment_key_serves_endpoints_given_without_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = str(WorkerToken(b"\x02" * 16, b"\x03" * 16))
    monkeypatch.setenv(rpc_keys.RPC_KEY_ENV, token)
    assert rpc_keys.token_for("10.9.8.5:50052") == parse_token(token)


def test_a_malformed_key_in_an_endpoint_is_one_error_line() -> None:
    with pytest.raises(InvalidSettingError) as caught:
        rpc.parse_endpoints("sc1nope@10.9.8.7:50052")
    assert "is not a worker key" in str(caught.value)


def test_a_bad_port_names_the_range_and_never_echoes_a_key() -> None:
    token = str(WorkerToken(b"\x04" * 16, b"\x05" * 16))
    with pytest.raises(InvalidSettingError) as plain:
        rpc.parse_worker_specs("plain@127.0.0.1:99999")
    assert "'plain@127.0.0.1:99999'" in str(plain.value) and "1..65535" in str(plain.value)
    with pytest.raises(InvalidSettingError) as keyed:
        rpc.parse_worker_specs(f"{token}@127.0.0.1:0")
    assert "'KEY@127.0.0.1:0'" in str(keyed.value) and token not in str(keyed.value)


@pytest.mark.parametrize("endpoint", ["plain@[::1]:50052", "plain@::1:50052"])
def test_a_plain_ipv6_worker_is_refused_with_the_flags(endpoint: str) -> None:
    # Accepted, it failed when llama.cpp connected: "Name or service not known".
    with pytest.raises(InvalidSettingError) as caught:
        rpc.parse_worker_specs(endpoint)
    assert "not by IPv6 address" in str(caught.value)


def test_a_keyed_ipv6_worker_may_be_written_in_brackets() -> None:
    # The tunnel reaches ::1:50052; [::1]:50052 failed with "Name or service not known".
    token = str(WorkerToken(b"\x06" * 16, b"\x07" * 16))
    assert rpc.parse_worker_specs(f"{token}@[::1]:50052") == (f"{token}@::1:50052",)
    assert rpc.parse_worker_specs("[fe80::2]:50052,::1:1") == ("fe80::2:50052", "::1:1")


def test_a_file_where_the_worker_folder_goes_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECCHAT_DATA_DIR", str(tmp_path))
    (tmp_path / "worker").write_text("in the way")
    with pytest.raises(DataFolderError) as caught:
        worker_folder()
    assert str(caught.value).startswith(f"cannot use data folder {tmp_path / 'worker'}")


@pytest.mark.parametrize("stored", ["", "abc\n"])
def test_a_key_file_too_short_to_use_is_named_with_its_remedy(tmp_path: Path, stored: str) -> None:
    load_identity(tmp_path)
    (tmp_path / "key").write_text(stored, encoding="ascii")
    with pytest.raises(InvalidSettingError) as refused:
        load_identity(tmp_path)
    message = str(refused.value)
    assert str(tmp_path / "key") in message and "delete it to make a new key" in message


@pytest.mark.parametrize("cut", ["after the certificate", "in the private key"])
def test_a_damaged_private_key_is_found_before_the_worker_serves(tmp_path: Path, cut: str) -> None:
    certificate = load_identity(tmp_path).certificate_pem
    text = certificate.read_text(encoding="ascii")
    end = text.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----\n")
    certificate.write_text(text[:end] if cut.startswith("after") else text[:-60], "ascii")
    with pytest.raises(InvalidSettingError, match=r"certificate .* is unreadable"):
        load_identity(tmp_path)


def test_a_passphrase_identity_says_so(tmp_path: Path) -> None:
    assert not load_identity(tmp_path).from_passphrase
    assert load_identity(tmp_path, "a passphrase of my own").from_passphrase
