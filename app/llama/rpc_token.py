"""A worker's key: the one string a client needs, carrying the secret and the certificate pin.

`specchat worker` prints it; the client gives it as KEY@HOST:PORT. It holds two halves: the
shared secret the client proves with (HMAC challenge/response, app/llama/rpc_auth.py) and the
SHA-256 fingerprint of the worker's self-signed certificate, which the client pins instead of
trusting any certificate authority. Base32 keeps it to letters and digits, so a double-click
selects all of it in a terminal.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from app.errors import InvalidSettingError

TOKEN_PREFIX = "sc1"
SECRET_BYTES = 16
FINGERPRINT_BYTES = 16  # a SHA-256 prefix: 128 bits against a forged certificate
MIN_PASSPHRASE_CHARS = 16
_TOKEN_CHARS = len(TOKEN_PREFIX) + 52  # base32 of 32 bytes, unpadded
_DERIVATION_LABEL = b"specchat worker key\0"


@dataclass(frozen=True, slots=True)
class WorkerToken:
    """The secret a client proves and the certificate fingerprint it pins."""

    secret: bytes
    fingerprint: bytes

    def __str__(self) -> str:
        body = base64.b32encode(self.secret + self.fingerprint).decode("ascii")
        return TOKEN_PREFIX + body.rstrip("=").lower()


def secret_from_passphrase(passphrase: str) -> bytes:
    """The secret a worker's passphrase stands for (the generated key file holds one too)."""
    if len(passphrase) < MIN_PASSPHRASE_CHARS:
        raise InvalidSettingError(
            f"the worker key must be at least {MIN_PASSPHRASE_CHARS} characters, "
            f"got {len(passphrase)}"
        )
    return hashlib.sha256(_DERIVATION_LABEL + passphrase.encode("utf-8")).digest()[:SECRET_BYTES]


def fingerprint_of(certificate_der: bytes) -> bytes:
    return hashlib.sha256(certificate_der).digest()[:FINGERPRINT_BYTES]


def readable_fingerprint(fingerprint: bytes) -> str:
    """'ab12:cd34:...' for a person comparing two screens."""
    text = fingerprint.hex()
    return ":".join(text[i : i + 4] for i in range(0, len(text), 4))


def parse_token(text: str) -> WorkerToken:
    """A key as the worker printed it; refused in words when it is not one."""
    clean = text.strip().lower()
    hint = "copy the whole key `specchat worker` printed (`specchat worker --show-key` there)"
    if not clean.startswith(TOKEN_PREFIX) or len(clean) != _TOKEN_CHARS:
        raise InvalidSettingError(
            f"{_shown(text)} is not a worker key (it starts with {TOKEN_PREFIX!r} and has "
            f"{_TOKEN_CHARS} characters); {hint}"
        )
    body = clean[len(TOKEN_PREFIX) :].upper()
    try:
        raw = base64.b32decode(body + "=" * (-len(body) % 8))
    except (binascii.Error, ValueError):
        raise InvalidSettingError(f"{_shown(text)} is not a worker key; {hint}") from None
    return WorkerToken(raw[:SECRET_BYTES], raw[SECRET_BYTES:])


def _shown(text: str) -> str:
    # Enough of a mistyped key to recognise it, never a whole (possibly valid) secret.
    return repr(text[:8] + "…") if len(text) > 8 else repr(text)
