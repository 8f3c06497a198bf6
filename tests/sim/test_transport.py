"""The HTTP posters (blocking :class:`HttpPoster` over http.client, and :class:`AsyncPoster` of the verb loop
over aiohttp) against a scripted socket server: what they send, Content-Length and chunked answers, answers
split over many packets, reconnecting after the server closed, errors."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from app.sim.transport import AsyncPoster, HttpPoster


class ScriptedServer:
    """Accepts connections on 127.0.0.1 and answers each request with the next scripted reply; a reply
    of None closes the connection without answering. Records every request's raw bytes."""

    def __init__(self, replies: list[list[bytes] | None]) -> None:
        self.replies = replies
        self.requests: list[bytes] = []
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _read_request(self, conn: socket.socket, buf: bytes) -> tuple[bytes, bytes] | None:
        while b"\r\n\r\n" not in buf:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
        )
        while len(rest) < length:
            rest += conn.recv(65536)
        return head + b"\r\n\r\n" + rest[:length], rest[length:]

    def _serve(self) -> None:
        while self.replies:
            conn, _ = self.sock.accept()
            self.connections += 1
            buf = b""
            with conn:
                while self.replies:
                    got = self._read_request(conn, buf)
                    if got is None:
                        break
                    request, buf = got
                    self.requests.append(request)
                    reply = self.replies.pop(0)
                    if reply is None:
                        break  # close without answering
                    for packet in reply:
                        conn.sendall(packet)
                        time.sleep(0.005)  # separate packets: the client must read on

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[ScriptedServer]:
    srv = ScriptedServer(request.param)
    yield srv
    srv.close()


def _ok(body: bytes) -> list[bytes]:
    return [b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body) + body]


SPLIT = [b"HTTP/1.1 2", b"00 OK\r\nContent-Len", b"gth: 12\r\n\r", b'\n{"a":', b" [1,2]}"]
CHUNKED = [
    b'HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"m":\r\n',
    b'4;x=1\r\n"x"}\r\n0\r\n\r\n',
]


@pytest.mark.parametrize("server", [[_ok(b'{"n":1}'), SPLIT, CHUNKED]], indirect=True)
def test_posts_and_reads_every_framing_on_one_connection(server: ScriptedServer) -> None:
    poster = HttpPoster("127.0.0.1", server.port)
    assert poster.post("/filter", b'{"Pod":{}}') == (200, b'{"n":1}')
    assert poster.post("/prioritize", b"{}") == (200, b'{"a": [1,2]}')
    assert poster.post("/bind", b"[]") == (404, b'{"m":"x"}')
    poster.close()
    assert server.connections == 1  # kept alive
    first = server.requests[0]
    assert first.startswith(b"POST /filter HTTP/1.1\r\n")
    assert b"\r\nContent-Type: application/json\r\n" in first and b"\r\nContent-Length: 10\r\n" in first
    assert first.endswith(b'\r\n\r\n{"Pod":{}}')


@pytest.mark.parametrize("server", [[_ok(b"1"), None, _ok(b"2")]], indirect=True)
def test_reconnects_once_when_the_server_closed(server: ScriptedServer) -> None:
    poster = HttpPoster("127.0.0.1", server.port)
    assert poster.post("/a", b"{}") == (200, b"1")
    assert poster.post("/b", b"{}") == (200, b"2")  # the first try hit the closed connection
    assert [r.split(b" ")[1] for r in server.requests] == [b"/a", b"/b", b"/b"]
    assert server.connections == 2
    poster.close()


@pytest.mark.parametrize("server", [[None, None]], indirect=True)
def test_a_server_closing_twice_is_a_read_error(server: ScriptedServer) -> None:
    poster = HttpPoster("127.0.0.1", server.port, timeout=5)
    with pytest.raises(httpx.ReadError, match="POST /x: RemoteDisconnected"):
        poster.post("/x", b"{}")


def test_nobody_listening_is_a_connect_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        with pytest.raises(httpx.ConnectError):
            HttpPoster("127.0.0.1", port, timeout=5).post("/x", b"{}")


CLOSING = [b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n1"]


@pytest.mark.parametrize("server", [[CLOSING, _ok(b"2")]], indirect=True)
def test_an_answer_closing_the_connection_makes_the_next_request_reconnect(server: ScriptedServer) -> None:
    poster = HttpPoster("127.0.0.1", server.port)
    assert poster.post("/a", b"{}") == (200, b"1")
    assert poster.post("/b", b"{}") == (200, b"2")
    assert server.connections == 2 and len(server.requests) == 2  # no failed try on the closed socket
    poster.close()


@pytest.mark.parametrize("server", [[_ok(b"{}")]], indirect=True)
def test_send_passes_headers_and_adds_host_and_length_once(server: ScriptedServer) -> None:
    poster = HttpPoster("127.0.0.1", server.port)
    status, headers, body = poster.send("PUT", "/x", b"ab", {"X-A": "1", "content-length": "2"})
    assert (status, body) == (200, b"{}") and ("content-type", "application/json") in headers
    head = server.requests[0].split(b"\r\n\r\n")[0].split(b"\r\n")
    assert head[0] == b"PUT /x HTTP/1.1"
    assert b"Host: 127.0.0.1:%d" % server.port in head and b"X-A: 1" in head
    assert [h for h in head if h.lower().startswith(b"content-length")] == [b"content-length: 2"]  # not added again
    poster.close()


@pytest.mark.parametrize("server", [[_ok(b'{"n":1}'), SPLIT, CHUNKED, CLOSING, _ok(b"2")]], indirect=True)
async def test_async_poster_reads_every_framing_and_reconnects_after_a_closing_answer(server: ScriptedServer) -> None:
    poster = AsyncPoster("127.0.0.1", server.port)
    assert await poster.post("/filter", b'{"Pod":{}}') == (200, b'{"n":1}')
    assert await poster.post("/prioritize", b"{}") == (200, b'{"a": [1,2]}')
    assert await poster.post("/bind", b"[]") == (404, b'{"m":"x"}')
    assert await poster.post("/a", b"{}") == (200, b"1")  # Connection: close
    assert await poster.post("/b", b"{}") == (200, b"2")
    await poster.aclose()
    assert server.connections == 2 and len(server.requests) == 5
    first = server.requests[0]
    assert first.startswith(b"POST /filter HTTP/1.1\r\n")
    assert b"\r\nContent-Type: application/json\r\n" in first and b"\r\nContent-Length: 10\r\n" in first
    assert first.endswith(b'\r\n\r\n{"Pod":{}}')


@pytest.mark.parametrize("server", [[_ok(b"1"), None, _ok(b"2")]], indirect=True)
async def test_async_poster_reconnects_once_when_the_server_closed(server: ScriptedServer) -> None:
    poster = AsyncPoster("127.0.0.1", server.port)
    assert await poster.post("/a", b"{}") == (200, b"1")
    assert await poster.post("/b", b"{}") == (200, b"2")  # the first try hit the closed connection
    assert [r.split(b" ")[1] for r in server.requests] == [b"/a", b"/b", b"/b"]
    await poster.aclose()


@pytest.mark.parametrize("server", [[None, None]], indirect=True)
async def test_async_poster_server_closing_twice_is_a_read_error(server: ScriptedServer) -> None:
    poster = AsyncPoster("127.0.0.1", server.port, timeout=5)
    with pytest.raises(httpx.ReadError, match="POST /x: ServerDisconnectedError"):
        await poster.post("/x", b"{}")
    await poster.aclose()


async def test_async_poster_nobody_listening_is_a_connect_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        poster = AsyncPoster("127.0.0.1", port, timeout=5)
        with pytest.raises(httpx.ConnectError):
            await poster.post("/x", b"{}")
        await poster.aclose()


@pytest.mark.parametrize("server", [[_ok(b"1"), _ok(b"2")]], indirect=True)
async def test_async_poster_sends_the_same_head_on_every_request(server: ScriptedServer) -> None:
    """The session's headers (Content-Type) and skipped auto headers hold for every request: the head is
    exactly Host, Accept, Content-Type and Content-Length, with no User-Agent or Accept-Encoding."""
    poster = AsyncPoster("127.0.0.1", server.port)
    assert await poster.post("/filter", b"{}") == (200, b"1")
    assert await poster.post("/filter", b'{"a":1}') == (200, b"2")
    await poster.aclose()
    for request, length in zip(server.requests, (2, 7), strict=True):
        head = request.split(b"\r\n\r\n")[0].split(b"\r\n")
        assert head[0] == b"POST /filter HTTP/1.1"
        assert sorted(h.split(b":")[0].lower() for h in head[1:]) == [
            b"accept",
            b"content-length",
            b"content-type",
            b"host",
        ]
        assert b"Content-Type: application/json" in head and b"Content-Length: %d" % length in head


async def test_async_poster_times_out_a_request_the_server_never_answers() -> None:
    """An answer that never comes is a ReadError after about ``timeout`` (not a hang), and the poster
    works again afterwards on a new connection."""
    silent = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(silent.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    poster = AsyncPoster("127.0.0.1", silent.getsockname()[1], timeout=0.4)
    for _ in range(2):  # the same poster again: the watchdog re-arms, the dead connection is not reused
        t0 = time.monotonic()
        with pytest.raises(httpx.ReadError, match=r"POST /filter: TimeoutError: no answer within 0.4 s"):
            await asyncio.wait_for(poster.post("/filter", b"{}"), 5)  # (a broken watchdog fails, not hangs)
        assert 0.35 <= time.monotonic() - t0 < 2.0
    # a cancel from outside stays a cancel (the caller's), not a timeout
    task = asyncio.ensure_future(poster.post("/filter", b"{}"))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await poster.aclose()
    assert len(held) == 3
    silent.close()
    for conn in held:
        conn.close()
    server = ScriptedServer([_ok(b"1"), _ok(b"2")])
    try:
        poster = AsyncPoster("127.0.0.1", server.port, timeout=0.4)
        assert await poster.post("/filter", b"{}") == (200, b"1")
        await asyncio.sleep(0.6)  # idle past the timeout: nothing in flight, nothing cancelled
        assert await poster.post("/filter", b"{}") == (200, b"2")
        await poster.aclose()
    finally:
        server.close()
