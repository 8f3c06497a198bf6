"""The service's HTTP protocol for uvicorn: httptools with the client certificate in the scope
(:class:`~app.server.clientauth.TLSScopeProtocol`), and each answer written to the socket in one piece.

uvicorn writes a response's status line and headers when the app sends ``http.response.start`` and the body
when it sends ``http.response.body``: two ``send`` calls on the socket for every answer, and on loopback each
one runs the whole TCP path down to waking the reader (kube-scheduler) in the sender's system call. In a real
control plane's profile of ``koord scheduler`` (py-spy, 500 nodes, 2,000 pods), the two writes of the verbs'
answers took about a fifth of the process's samples (issue 47). :class:`CoalescingTransport` holds a write and
sends it together with the next one, at once: an answer's head leaves with its body, in one call, the moment the
body is written. A write with no follower in the same event-loop turn (a head without a body, a streamed part)
leaves at the end of that turn. Nothing waits longer than it did: holding every write to the end of the turn
instead delayed answers behind the other work of the turn (watch events, other requests), and on the real
control plane that latency, paid once per scheduling cycle of kube-scheduler, cost more throughput than the
saved system call gave.
"""

from __future__ import annotations

import asyncio
from typing import Any

from app.server.clientauth import TLSScopeProtocol


class CoalescingTransport:
    """A write transport that sends a write together with the next one (at once), or alone at the end of the
    event-loop turn when no other follows.

    Everything but writing, closing and the write buffer's size is ``transport``'s own (attribute access is
    delegated). ``close`` and ``write_eof`` send what is held first; ``abort`` drops it, as the transport drops
    its own buffer.

    Args:
        transport: the connection's transport.
        loop: the event loop the writes happen on (the flush is scheduled there with ``call_soon``).
    """

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Hold ``data`` when nothing is held (sent with the next write, or at the end of this loop turn); else
        send what is held and ``data`` in one write now. Empty data writes nothing."""
        if not data:
            return
        held = self._held
        if held is None:
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
            return
        self._held = None
        if not self._transport.is_closing():
            self._transport.write(held + data)

    def writelines(self, lines: Any) -> None:
        """:meth:`write` of each of ``lines``."""
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Write what is held now (nothing when the connection is closing or nothing is held)."""
        held = self._held
        self._held = None
        if held and not self._transport.is_closing():
            self._transport.write(held)

    def get_write_buffer_size(self) -> int:
        """Bytes held here and in the transport's buffer."""
        held = self._held
        return self._transport.get_write_buffer_size() + (len(held) if held else 0)

    def close(self) -> None:
        """Write what is held, then close the transport."""
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        """Write what is held, then half-close the transport."""
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        """Drop what is held and abort the transport."""
        self._held = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class ServiceProtocol(TLSScopeProtocol):
    """uvicorn's httptools protocol as the service runs it: the ASGI TLS extension in every scope
    (:class:`~app.server.clientauth.TLSScopeProtocol`) and each answer written in one piece
    (:class:`CoalescingTransport`). Pass the class as uvicorn's ``http``."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Set the connection up as :class:`~app.server.clientauth.TLSScopeProtocol` does, over a
        :class:`CoalescingTransport` of ``transport``."""
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
