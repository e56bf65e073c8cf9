"""Forward bytes both ways between a plain socket (llama.cpp's side) and a TLS stream.

One thread per connection drives both directions with a selector, so the one ssl.SSLObject is
never touched by two threads at once. Writes are tried at once and only wait for the selector
when the kernel buffer is full, so a small RPC request crosses with no extra wake-up. When
either side closes or fails, whatever is already buffered for the other side is flushed (for a
bounded time) and both are closed: for llama.cpp, a dropped connection ends the session.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import selectors
import socket
import ssl

from app.llama.rpc_auth import TlsStream

CHUNK = 1024 * 1024
# The most one TLS record holds: ssl's read() allocates its whole size up front, and a larger
# allocation than this per small RPC message would cost more than the message.
RECORD = 16 * 1024
_IOV_MAX = 512  # buffers per sendmsg; POSIX guarantees at least 16, Linux takes 1024
_SCATTER = hasattr(socket.socket, "sendmsg")  # not on Windows
HIGH_WATER = 8 * 1024 * 1024  # stop reading a side while this much waits for the other
FLUSH_S = 2.0

_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


class _Side:
    """One socket, the bytes waiting to be written to it, and its registration."""

    def __init__(self, sock: socket.socket, selector: selectors.BaseSelector) -> None:
        self.sock = sock
        self._chunks: collections.deque[memoryview] = collections.deque()
        self.waiting = 0  # bytes in _chunks
        self._selector = selector
        self._mask = 0

    def queue(self, data: bytes | memoryview) -> None:
        if data:
            self._chunks.append(memoryview(data))
            self.waiting += len(data)

    def write_now(self) -> None:
        # Scatter-gather: the many 16 KiB TLS records of a bulk transfer leave in one call.
        while self._chunks:
            try:
                if _SCATTER:
                    sent = self.sock.sendmsg(list(itertools.islice(self._chunks, _IOV_MAX)))
                else:
                    sent = self.sock.send(self._chunks[0])
            except (BlockingIOError, InterruptedError):
                return
            self.waiting -= sent
            while sent:
                head = self._chunks[0]
                if len(head) <= sent:
                    sent -= len(head)
                    self._chunks.popleft()
                else:
                    self._chunks[0] = head[sent:]
                    sent = 0

    def flush(self) -> None:
        """Send what waits, blocking for at most FLUSH_S (the other side is gone)."""
        with contextlib.suppress(OSError):
            self.sock.settimeout(FLUSH_S)
            for chunk in self._chunks:
                self.sock.sendall(chunk)

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


def _interest(*, reading: bool, writing: int) -> int:
    return (_READ if reading else 0) | (_WRITE if writing else 0)


def _decrypt(stream: TlsStream, into: _Side) -> bool:
    """Queue decrypted bytes for the plain side; False once the peer ended TLS."""
    # Asked only when bytes wait: an empty read costs a raised SSLWantReadError.
    while (stream.incoming.pending or stream.tls.pending()) and into.waiting < HIGH_WATER:
        try:
            data = stream.tls.read(RECORD)
        except ssl.SSLWantReadError:
            return True  # the rest of a record is still on its way
        except ssl.SSLZeroReturnError:
            return False
        if not data:
            return False
        into.queue(data)
    return True


def pump(local: socket.socket, stream: TlsStream) -> None:
    """Forward until one side closes; closes both sockets before returning."""
    net = stream.sock
    selector = selectors.DefaultSelector()
    try:
        local.setblocking(False)
        net.setblocking(False)
        plain, secure = _Side(local, selector), _Side(net, selector)
        plain.queue(bytes(stream.received))  # anything that arrived with the handshake
        stream.received.clear()
        _run(stream, plain, secure, selector)
    finally:
        selector.close()
        for sock in (local, net):
            with contextlib.suppress(OSError):
                sock.close()


def _run(stream: TlsStream, plain: _Side, secure: _Side, selector: selectors.BaseSelector) -> None:
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    open_ = True
    while open_:
        try:
            open_ = _decrypt(stream, plain)
            secure.queue(stream.outgoing.read())  # e.g. TLS session tickets, key updates
            plain.write_now()
            secure.write_now()
        except (OSError, ssl.SSLError):
            break
        if not open_:
            break
        plain.want(_interest(reading=secure.waiting < HIGH_WATER, writing=plain.waiting))
        secure.want(_interest(reading=plain.waiting < HIGH_WATER, writing=secure.waiting))
        for key, events in selector.select():
            side: _Side = key.data
            if not events & _READ:
                continue
            try:
                size = side.sock.recv_into(buffer)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                open_ = False
                break
            if not size:
                open_ = False
                break
            if side is plain:
                stream.tls.write(view[:size])
                secure.queue(stream.outgoing.read())
            else:
                stream.incoming.write(view[:size])
    plain.flush()
    secure.flush()
