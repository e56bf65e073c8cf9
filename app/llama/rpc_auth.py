"""The worker's door: TLS 1.3 to a pinned certificate, then an HMAC challenge on the key.

Order on a new connection to `specchat worker`:

1. TLS handshake. The worker presents its self-signed certificate; the client compares its
   SHA-256 fingerprint with the one in the worker's key and hangs up on any other.
2. The worker sends MAGIC and a random nonce. The client answers MAGIC, a mode (a session for
   llama.cpp, or a check that only asks whether the worker is free), its client id and
   HMAC-SHA256(secret, nonce | mode | client id | certificate fingerprint). Binding the
   fingerprint means an answer computed for an impostor is worthless at the real worker.
3. The worker answers one line: OK (a session: llama.cpp's server is connected behind it),
   BUSY, DENIED or DOWN. Only after OK does a byte of llama.cpp's protocol flow.

TLS runs through ssl.SSLObject over memory BIOs, so one thread can drive both directions of a
connection (app/llama/rpc_pump.py) without sharing an OpenSSL object between threads.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from app.errors import RpcConnectError
from app.llama.rpc_keepalive import arm_socket
from app.llama.rpc_token import WorkerToken, fingerprint_of

MAGIC = b"SPECCHAT-RPC/1\n"
NONCE_BYTES = 32
CLIENT_ID_BYTES = 16
MAC_BYTES = 32
MODE_SESSION = b"S"
MODE_CHECK = b"C"
OK, BUSY, DENIED, DOWN = b"OK", b"BUSY", b"DENIED", b"DOWN"
_LINE_LIMIT = 64
_READ_CHUNK = 256 * 1024
_RECORD = 16 * 1024  # the most plaintext one TLS record holds
_MAC_LABEL = b"specchat-rpc-auth\0"


class AuthError(Exception):
    """A connection that did not get through the door, and why (for the worker's log)."""


def new_client_id() -> bytes:
    return secrets.token_bytes(CLIENT_ID_BYTES)


def _mac(secret: bytes, nonce: bytes, mode: bytes, client_id: bytes, fingerprint: bytes) -> bytes:
    message = _MAC_LABEL + nonce + mode + client_id + fingerprint
    return hmac.new(secret, message, hashlib.sha256).digest()


def server_context(certificate_pem: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.load_cert_chain(certificate_pem)
    return context


def client_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    # No authority vouches for a worker: its certificate is checked against the pinned
    # fingerprint after the handshake (TLS itself still proves the worker holds its key).
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class TlsStream:
    """TLS over a connected socket through memory BIOs; blocking until handed to the pump."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, *, server_side: bool):
        self.sock = sock
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_side=server_side)
        self.received = bytearray()  # decrypted but not yet consumed

    def flush(self) -> None:
        data = self.outgoing.read()
        if data:
            self.sock.sendall(data)

    def _fill(self) -> None:
        data = self.sock.recv(_READ_CHUNK)
        if not data:
            raise ConnectionError("the connection closed")
        self.incoming.write(data)

    def handshake(self) -> None:
        while True:
            try:
                self.tls.do_handshake()
                self.flush()
                return
            except ssl.SSLWantReadError:
                self.flush()
                self._fill()

    def send(self, data: bytes) -> None:
        self.tls.write(data)
        self.flush()

    def _read_more(self) -> None:
        try:
            self.received += self.tls.read(_RECORD)
        except ssl.SSLWantReadError:
            self.flush()
            self._fill()
        except ssl.SSLZeroReturnError:
            raise ConnectionError("the connection closed") from None

    def recv_exact(self, size: int) -> bytes:
        while len(self.received) < size:
            self._read_more()
        data = bytes(self.received[:size])
        del self.received[:size]
        return data

    def recv_line(self) -> bytes:
        while b"\n" not in self.received:
            if len(self.received) > _LINE_LIMIT:
                raise ConnectionError("an overlong answer")
            self._read_more()
        line, _, rest = bytes(self.received).partition(b"\n")
        self.received = bytearray(rest)
        return line

    def peer_fingerprint(self) -> bytes:
        der = self.tls.getpeercert(binary_form=True)
        return fingerprint_of(der) if der else b""


# -- the worker's side ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Admitted:
    mode: bytes
    client_id: bytes


def admit(stream: TlsStream, secret: bytes, fingerprint: bytes) -> Admitted:
    """Run the handshake and challenge on an accepted connection; AuthError when refused."""
    try:
        stream.handshake()
    except ssl.SSLError as exc:
        raise AuthError(f"not a TLS client ({exc.reason or exc})") from None
    nonce = secrets.token_bytes(NONCE_BYTES)
    stream.send(MAGIC + nonce)
    answer = stream.recv_exact(len(MAGIC) + 1 + CLIENT_ID_BYTES + MAC_BYTES)
    magic, rest = answer[: len(MAGIC)], answer[len(MAGIC) :]
    mode, client_id, mac = rest[:1], rest[1 : 1 + CLIENT_ID_BYTES], rest[1 + CLIENT_ID_BYTES :]
    if magic != MAGIC or mode not in (MODE_SESSION, MODE_CHECK):
        raise AuthError("another version of the worker protocol")
    if not hmac.compare_digest(mac, _mac(secret, nonce, mode, client_id, fingerprint)):
        stream.send(DENIED + b"\n")
        raise AuthError("wrong key")
    return Admitted(mode, client_id)


# -- the client's side ----------------------------------------------------------------------


def connect(endpoint: str, timeout: float) -> socket.socket:
    """A TCP connection to a worker, or RpcConnectError saying in words why there is none."""
    host, _, port = endpoint.rpartition(":")
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout)
    except TimeoutError:
        raise RpcConnectError(
            endpoint, f"no answer within {timeout:.0f} s (is the machine on and the port open?)"
        ) from None
    except ConnectionRefusedError:
        raise RpcConnectError(
            endpoint, "connection refused (is `specchat worker` running there on that port?)"
        ) from None
    except OSError as exc:
        raise RpcConnectError(endpoint, exc.strerror or str(exc)) from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    arm_socket(sock)  # a worker machine that vanishes must end the wait (rpc_keepalive)
    return sock


_REFUSALS = {
    BUSY: "it is busy serving another client (a worker serves one at a time); try again "
    "when that client is done",
    DENIED: "it refused the key: the worker has another one (`specchat worker --show-key` "
    "there prints it, given the same --key if the worker was started with one)",
    DOWN: "its llama.cpp server is not running (see the worker's terminal)",
}


def open_stream(
    endpoint: str, token: WorkerToken, mode: bytes, client_id: bytes, timeout: float
) -> TlsStream:
    """A TLS connection to a worker that accepted the key; RpcConnectError in words if not."""
    sock = connect(endpoint, timeout)
    try:
        stream = TlsStream(sock, client_context(), server_side=False)
        try:
            stream.handshake()
        except TimeoutError:
            raise
        except OSError:  # TLS refused, or the connection closed by a plain llama.cpp server
            # A worker flooded with unfinished connections closes new ones the same way.
            raise RpcConnectError(
                endpoint,
                "it closed the connection before TLS: it does not speak the encrypted worker "
                "protocol (if it is llama.cpp's rpc-server or `specchat worker "
                f"--insecure-plain`, use plain@{endpoint}), or it is turning connections away "
                "(its terminal says so)",
            ) from None
        if not hmac.compare_digest(stream.peer_fingerprint(), token.fingerprint):
            raise RpcConnectError(
                endpoint,
                "its certificate is not the one this key names: another machine answers at "
                "that address, or the worker has a new identity (`specchat worker --show-key` "
                "there prints its key)",
            )
        greeting = stream.recv_exact(len(MAGIC) + NONCE_BYTES)
        if greeting[: len(MAGIC)] != MAGIC:
            raise RpcConnectError(
                endpoint,
                "it speaks another version of the worker protocol; run the same "
                "SpecChat on both machines",
            )
        nonce = greeting[len(MAGIC) :]
        mac = _mac(token.secret, nonce, mode, client_id, token.fingerprint)
        stream.send(MAGIC + mode + client_id + mac)
        answer = stream.recv_line()
    except TimeoutError:
        sock.close()
        raise RpcConnectError(endpoint, f"no answer to the key within {timeout:.0f} s") from None
    except OSError:  # reset, closed, or TLS records that do not decrypt
        sock.close()
        raise RpcConnectError(endpoint, "it closed the connection while checking the key") from None
    except BaseException:
        sock.close()
        raise
    if answer != OK:
        sock.close()
        reason = _REFUSALS.get(answer, f"it refused the connection ({answer[:20]!r})")
        raise RpcConnectError(endpoint, reason)
    return stream
