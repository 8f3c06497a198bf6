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
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE

from app.server.bodylimit import announced_over
from app.server.clientauth import TLSScopeProtocol
from app.server.extender_routes import InlineVerbs


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

    def write_now(self, data: bytes) -> None:
        """Send what is held and ``data`` in one write now: for a whole answer, which nothing follows."""
        held = self._held
        self._held = None
        if not self._transport.is_closing():
            self._transport.write(held + data if held else data)

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
    (:class:`~app.server.clientauth.TLSScopeProtocol`), each answer written in one piece
    (:class:`CoalescingTransport`), and ``POST /filter``, ``POST /prioritize`` and ``POST /bind`` answered inline.

    Inline: when the served app has ``inline_verbs`` (:class:`~app.server.extender_routes.InlineVerbs`, set by
    :func:`app.server.app.create_app` for roles that serve the extender), a request for one of its verbs is
    answered from the parser's message-complete callback, with no ASGI scope or messages: the answer to ``/filter``
    and ``/prioritize`` is written in the event-loop step that read the request's last bytes, the one to ``/bind``
    (whose binding cycle awaits the API server) by a task started there (:meth:`_answer_later`). The same
    handlers, answers, metrics, body limit (413) and client-certificate rules (401/403) apply as on the ASGI path;
    a handler's unexpected exception is logged as uvicorn logs it and answered with uvicorn's plain 500 and
    ``connection: close``. Everything else takes uvicorn's ASGI path: other methods and paths (a query string
    included), a request pipelined behind an unfinished one (answers stay in order), ``Expect: 100-continue``,
    upgrades, and every request when uvicorn writes access lines (its access logger has a handler and logs INFO)
    or serves under a ``root_path``.
    Once an inline answer is written, the inline verbs' follow-up work runs (:meth:`InlineVerbs.after
    <app.server.extender_routes.InlineVerbs.after>`: after ``/filter``, the ``/prioritize`` answer is worked out
    ahead); an exception there is logged and the connection goes on. Pass the class as uvicorn's ``http``.
    """

    _inline: InlineVerbs | None = None
    #: The connection's transport as this protocol wrapped it (``self.transport`` is the same object).
    _out: CoalescingTransport
    #: The raw target of the inline request being read (None: the request takes the ASGI path).
    _inline_target: bytes | None = None
    _inline_keep_alive = True
    _inline_parts: list[bytes]
    #: Body bytes of the inline request so far; -1 once over the limit (the rest is discarded).
    _inline_size = 0
    #: The verb being answered from a task (:meth:`_answer_later`), until its task ends.
    _pending: _PendingAnswer | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Set the connection up as :class:`~app.server.clientauth.TLSScopeProtocol` does, over a
        :class:`CoalescingTransport` of ``transport``, and find the app's inline verbs."""
        self._out = CoalescingTransport(transport, self.loop)
        super().connection_made(self._out)  # type: ignore[arg-type]
        inline = getattr(self.config.app, "inline_verbs", None)
        logs_access = self.access_log and self.access_logger.isEnabledFor(logging.INFO)  # uvicorn's level for them
        if isinstance(inline, InlineVerbs) and not logs_access and not self.root_path:
            self._inline = inline
        self._inline_parts = []

    def on_headers_complete(self) -> None:
        """Take an inline verb's request (see the class), or start the ASGI cycle as uvicorn does."""
        inline = self._inline
        if (
            inline is not None
            and self.url in inline.PATHS
            and self.parser.get_method() == b"POST"
            and not self.expect_100_continue
            and not self.pipeline
            and (self.cycle is None or self.cycle.response_complete)
            and not self.parser.should_upgrade()
        ):
            self._inline_target = self.url
            self._inline_keep_alive = self.parser.get_http_version() != "1.0" and self.parser.should_keep_alive()
            self._inline_parts = []
            self._inline_size = -1 if announced_over(self.headers, inline.max_body_size) else 0
            return
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        """Keep an inline request's body (dropped once over the limit), or hand it to the ASGI cycle."""
        if self._inline_target is None:
            super().on_body(body)
            return
        if self._inline_size < 0:
            return
        assert self._inline is not None
        self._inline_size += len(body)
        if self._inline_size > self._inline.max_body_size:
            self._inline_size = -1
            self._inline_parts = []
            return
        self._inline_parts.append(body)

    def on_message_complete(self) -> None:
        """Answer an inline request now, or tell the ASGI cycle its body is complete."""
        target = self._inline_target
        if target is None:
            super().on_message_complete()
            return
        self._inline_target = None
        inline = self._inline
        assert inline is not None
        parts, self._inline_parts = self._inline_parts, []
        answer = inline.refusal(target, self._tls)
        if answer is None:
            if self._inline_size < 0:
                answer = inline.too_large()
            elif target in inline.LATER:
                self._answer_later(inline, target, parts[0] if len(parts) == 1 else b"".join(parts))
                return
            else:
                body = parts[0] if len(parts) == 1 else b"".join(parts)
                try:
                    answer = inline.answer(target, body)
                except Exception as exc:  # a bug: logged and answered as uvicorn does for an ASGI app
                    self.logger.error("Exception in ASGI application\n", exc_info=exc)
                    self._write_answer(500, _INTERNAL_ERROR, b"text/plain; charset=utf-8", keep_alive=False)
                    return
        self._write_answer(answer[0], answer[1], b"application/json", keep_alive=self._inline_keep_alive)
        try:
            inline.after(target)
        except Exception as exc:  # a bug: the answer is out, the next request is served as usual
            self.logger.error("Exception after answering %s\n", target.decode("latin-1"), exc_info=exc)

    def _answer_later(self, inline: InlineVerbs, target: bytes, body: bytes) -> None:
        """Answer ``target`` (a key of ``inline.LATER``) from a task: a :class:`_PendingAnswer` stands as the
        connection's cycle meanwhile, so a request pipelined behind it waits (uvicorn queues it and pauses reading),
        a graceful shutdown waits for the task (it is one of the server's tasks) and closes the connection after the
        answer, and the connection's loss reaches the handler as ``http.disconnect``."""
        pending = _PendingAnswer(self._inline_keep_alive)
        self.cycle = pending  # type: ignore[assignment]
        self._pending = pending
        task = self.loop.create_task(self._finish_later(inline, target, body, pending))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _finish_later(self, inline: InlineVerbs, target: bytes, body: bytes, pending: _PendingAnswer) -> None:
        try:
            status, data = await inline.answer_later(target, body, pending.receive)
        except Exception as exc:  # a bug: logged and answered as uvicorn does for an ASGI app
            self.logger.error("Exception in ASGI application\n", exc_info=exc)
            status, data, content_type, keep_alive = 500, _INTERNAL_ERROR, b"text/plain; charset=utf-8", False
        else:
            content_type, keep_alive = b"application/json", pending.keep_alive
        finally:
            if self._pending is pending:
                self._pending = None
        if pending.disconnected:  # the caller is gone: nothing to answer
            return
        pending.response_complete = True
        self._write_answer(status, data, content_type, keep_alive=keep_alive)

    def connection_lost(self, exc: Exception | None) -> None:
        """As uvicorn's, and a verb answered later (:meth:`_answer_later`) learns that its caller is gone, even with
        a pipelined request queued behind it (uvicorn then only tells that request's cycle)."""
        pending = self._pending
        if pending is not None and not pending.response_complete:
            pending.disconnected = True
            pending.message_event.set()
        super().connection_lost(exc)

    def _write_answer(self, status: int, body: bytes, content_type: bytes, *, keep_alive: bool) -> None:
        """Write one answer (uvicorn's default headers first) in one write; close the connection unless
        ``keep_alive``; then finish the request as uvicorn's cycle does (count it, arm the keep-alive timer)."""
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [b"content-length: ", str(len(body)).encode(), b"\r\ncontent-type: ", content_type, b"\r\n"]
        if not keep_alive:
            head.append(b"connection: close\r\n")
        head += [b"\r\n", body]
        self._out.write_now(b"".join(head))  # a whole answer: nothing to wait for
        if not keep_alive:
            self._out.close()
        self.on_response_complete()


_INTERNAL_ERROR = b"Internal Server Error"


class _PendingAnswer:
    """What uvicorn's protocol reads of its current request cycle, for a verb answered from a task
    (:meth:`ServiceProtocol._answer_later`): whether the answer is written (``response_complete``), whether the
    connection was lost first (``disconnected``, with ``message_event`` set), and whether to keep the connection
    after the answer (``keep_alive``; a graceful shutdown clears it).

    Args:
        keep_alive: the request asked to keep the connection (HTTP/1.1 without ``Connection: close``).
    """

    __slots__ = ("disconnected", "keep_alive", "message_event", "response_complete")

    def __init__(self, keep_alive: bool) -> None:
        self.keep_alive = keep_alive
        self.response_complete = False
        self.disconnected = False
        self.message_event = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        """The ASGI ``receive`` of a request whose body is read: ``{"type": "http.disconnect"}`` once the connection
        is lost (it never returns before)."""
        while not self.disconnected:
            await self.message_event.wait()
            self.message_event.clear()
        return {"type": "http.disconnect"}
