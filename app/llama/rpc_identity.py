"""A worker's identity: its secret and its self-signed TLS certificate, kept in its data folder.

Both are made at the worker's first start and kept readable by its owner only (0600 in a 0700
folder): `key` holds the secret as text, `tls.pem` the certificate and its private key. A
secret given with --key or SPECCHAT_WORKER_KEY replaces the stored one for that run and is
never written. The certificate is never signed by anyone else: clients pin its fingerprint,
which travels inside the worker's key (app/llama/rpc_token.py).
"""

from __future__ import annotations

import base64
import datetime
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from app.durable import replace_atomically
from app.errors import InvalidSettingError
from app.llama.rpc_token import (
    SECRET_BYTES,
    WorkerToken,
    fingerprint_of,
    secret_from_passphrase,
)
from app.paths import DataFolderError, create_private_file, data_dir, make_private_dir

WORKER_KEY_ENV = "SPECCHAT_WORKER_KEY"
_KEY_FILE = "key"
_CERT_FILE = "tls.pem"
_CERT_YEARS = 50  # nobody checks the dates of a pinned certificate; it must simply not expire


@dataclass(frozen=True, slots=True)
class WorkerIdentity:
    secret: bytes
    certificate_pem: Path  # the certificate followed by its private key
    fingerprint: bytes
    key_is_new: bool  # made by this start: the one time the key is printed unasked
    from_passphrase: bool = False  # --key or SPECCHAT_WORKER_KEY, not the stored key

    @property
    def token(self) -> WorkerToken:
        return WorkerToken(self.secret, self.fingerprint)


def worker_folder() -> Path:
    folder = data_dir() / "worker"
    try:
        make_private_dir(folder)
    except OSError as exc:  # a file in its way: one sentence, as for the data folder itself
        raise DataFolderError(folder, exc.strerror or str(exc)) from None
    return folder


def _write_private(path: Path, text: str) -> None:
    # Written in place, a crash or a full disk midway left a short key (refused at every start
    # after, as if the user had given it) or a certificate without its private key, and with no
    # fsync a power cut could empty a key already printed and handed to clients. The temporary
    # file is private from its creation: it holds the secret too.
    def write(temporary: Path) -> None:
        create_private_file(temporary)
        temporary.write_text(text, encoding="ascii")

    replace_atomically(path, write)


def _stored_passphrase(folder: Path) -> tuple[str, bool]:
    path = folder / _KEY_FILE
    if not path.exists():
        passphrase = base64.b32encode(secrets.token_bytes(SECRET_BYTES)).decode().rstrip("=")
        _write_private(path, passphrase.lower() + "\n")
        return passphrase.lower(), True
    try:
        passphrase = path.read_text(encoding="ascii").strip()
        secret_from_passphrase(passphrase)
    except PermissionError:
        raise InvalidSettingError(_not_yours(path, "key")) from None
    except (OSError, UnicodeDecodeError, InvalidSettingError) as exc:
        reason = str(exc)
        raise InvalidSettingError(
            f"cannot use the worker key {path} ({reason}); delete it to make a new key "
            "(clients then need the new key)"
        ) from None
    return passphrase, False


def _not_yours(path: Path, what: str) -> str:
    # Deleting it would make every client need a new key: the owner is what to fix.
    return (
        f"cannot read the worker {what} {path}: permission denied; run the worker as the "
        "user who owns it, or give it back to that user"
    )


def _make_certificate(path: Path) -> None:
    from cryptography import x509  # noqa: PLC0415 - only at a worker's first start
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415
    from cryptography.x509.oid import NameOID  # noqa: PLC0415

    private_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "specchat worker")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=365 * _CERT_YEARS))
        .sign(private_key, hashes.SHA256())
    )
    pem = certificate.public_bytes(serialization.Encoding.PEM) + private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    _write_private(path, pem.decode("ascii"))


def _certificate_fingerprint(path: Path) -> bytes:
    import ssl  # noqa: PLC0415

    try:
        text = path.read_text(encoding="ascii")
        begin = text.index("-----BEGIN CERTIFICATE-----")
        end = text.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----")
        der = ssl.PEM_cert_to_DER_cert(text[begin:end])
        # The private key after it too: found damaged only once serving, it ended the worker
        # in a traceback after it had said it was serving.
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(path)
    except PermissionError:
        raise InvalidSettingError(_not_yours(path, "certificate")) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InvalidSettingError(
            f"the worker certificate {path} is unreadable ({exc}); delete it to make a new one "
            "(clients then need the new key)"
        ) from None
    return fingerprint_of(der)


def load_identity(folder: Path | None = None, passphrase: str | None = None) -> WorkerIdentity:
    """The worker's secret and certificate, made on first use; passphrase overrides the key."""
    home = folder if folder is not None else worker_folder()
    make_private_dir(home)
    given = passphrase if passphrase is not None else os.environ.get(WORKER_KEY_ENV) or None
    if given is not None:
        secret, is_new = secret_from_passphrase(given), False
    else:
        stored, is_new = _stored_passphrase(home)
        secret = secret_from_passphrase(stored)
    certificate = home / _CERT_FILE
    if not certificate.exists():
        _make_certificate(certificate)
        is_new = True  # a new certificate means a new pin: clients need the new key
    fingerprint = _certificate_fingerprint(certificate)
    return WorkerIdentity(secret, certificate, fingerprint, is_new, given is not None)
