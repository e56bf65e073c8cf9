"""Forward bytes both ways between a plain socket (llama.cpp's side) and a TLS stream.

One thread per connection drives both directions with a selector, so the one ssl.SSLObject is
never touched by two threads at once. Writes are tried at once and only wait for the selector
when the kernel buffer is full, so a small RPC request crosses with no extra wake-up. When
either side closes or fails, whatever is already buffered for the other side is flushed (for a
bounded time) and both are closed: for llama.cpp, a dropped connection ends the session.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl

from app.llama.rpc_auth import TlsStream

CHUNK = 256 * 1024
HIGH_WATER = 8 * 1024 * 1024  # stop reading a side while this much waits for the other
FLUSH_S = 2.0

_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


class _Side:
    """One socket, the bytes waiting to be written to it, and its registration."""

    def __init__(self, sock: socket.socket, selector: selectors.BaseSelector) -> None:
        self.sock = sock
        self.pending = bytearray()
        self._selector = selector
        self._mask = 0

    def write_now(self) -> None:
        while self.pending:
            try:
                sent = self.sock.send(self.pending)
            except (BlockingIOError, InterruptedError):
                return
            del self.pending[:sent]

    def want(self, mask: int) -> None:
        if mask == self._mask:
            return
        if self._mask == 0:
            self._selector.register(self.sock, mask, self)
        elif mask == 0:
            self._selector.unregister(self.sock)
        else:
            self._selector.modify(self.sock, mask, self)
        self._mask = mask


def _interest(*, reading: bool, writing: bytearray) -> int:
    return (_READ if reading else 0) | (_WRITE if writing else 0)


def _decrypt(stream: TlsStream, into: bytearray) -> bool:
    """Move decrypted bytes into `into`; False once the peer ended TLS."""
    while len(into) < HIGH_WATER:
        try:
            data = stream.tls.read(CHUNK)
        except ssl.SSLWantReadError:
            return True
        except ssl.SSLZeroReturnError:
            return False
        if not data:
            return False
        into += data
    return True


def pump(local: socket.socket, stream: TlsStream) -> None:
    """Forward until one side closes; closes both sockets before returning."""
    net = stream.sock
    selector = selectors.DefaultSelector()
    try:
        local.setblocking(False)
        net.setblocking(False)
        plain, secure = _Side(local, selector), _Side(net, selector)
        plain.pending += stream.received  # anything that arrived with the handshake
        stream.received.clear()
        _run(stream, plain, secure, selector)
    finally:
        selector.close()
        for sock in (local, net):
            with contextlib.suppress(OSError):
                sock.close()


def _run(stream: TlsStream, plain: _Side, secure: _Side, selector: selectors.BaseSelector) -> None:
    open_ = True
    while open_:
        try:
            open_ = _decrypt(stream, plain.pending)
            secure.pending += stream.outgoing.read()  # e.g. TLS session tickets, key updates
            plain.write_now()
            secure.write_now()
        except (OSError, ssl.SSLError):
            break
        if not open_:
            break
        plain.want(_interest(reading=len(secure.pending) < HIGH_WATER, writing=plain.pending))
        secure.want(_interest(reading=len(plain.pending) < HIGH_WATER, writing=secure.pending))
        for key, events in selector.select():
            side: _Side = key.data
            if not events & _READ:
                continue
            try:
                data = side.sock.recv(CHUNK)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                open_ = False
                break
            if not data:
                open_ = False
                break
            if side is plain:
                stream.tls.write(data)
                secure.pending += stream.outgoing.read()
            else:
                stream.incoming.write(data)
    _flush(plain, secure)


def _flush(*sides: _Side) -> None:
    for side in sides:
        if not side.pending:
            continue
        with contextlib.suppress(OSError):
            side.sock.settimeout(FLUSH_S)
            side.sock.sendall(side.pending)
