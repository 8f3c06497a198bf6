"""The service's HTTP protocol writes each answer in one piece (issue 47): what the app sends in one event-loop
turn leaves in one socket write, in order, over a real uvicorn server and with a fake transport."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from app.server.httpprotocol import CoalescingTransport, ServiceProtocol
from app.sources.files import FileSource
from tests.conftest import LiveServer


class _Transport(asyncio.Transport):
    """Records writes; closing, aborting and buffer size as a transport reports them."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closing = False
        self.events: list[str] = []

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.events.append("close")
        self.closing = True

    def abort(self) -> None:
        self.events.append("abort")
        self.closing = True

    def write_eof(self) -> None:
        self.events.append("eof")

    def get_write_buffer_size(self) -> int:
        return 7

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


def test_a_write_leaves_with_the_next_at_once_or_alone_at_the_end_of_the_turn() -> None:
    async def scenario() -> None:
        raw = _Transport()
        t = CoalescingTransport(raw, asyncio.get_running_loop())
        head = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"
        t.write(head)
        t.write(b"")  # nothing
        assert raw.writes == [] and t.get_write_buffer_size() == 7 + len(head)
        t.write(memoryview(b"{}"))  # the body: head and body leave together, now (not at the end of the turn)
        assert raw.writes == [head + b"{}"] and t.get_write_buffer_size() == 7
        t.write(b"a")  # alone in its turn: leaves at the end of the turn
        assert raw.writes == [head + b"{}"]
        await asyncio.sleep(0)
        assert raw.writes[1:] == [b"a"]
        t.writelines([b"b", b"c", b"d"])  # pairs leave at once; the odd one at the end of the turn
        assert raw.writes[2:] == [b"bc"]
        await asyncio.sleep(0)
        assert raw.writes[2:] == [b"bc", b"d"]
        assert t.get_extra_info("peername") == ("127.0.0.1", 1)  # the rest is the transport's own
        t.write(b"last")
        t.write_eof()  # sends what is held first
        assert raw.writes[-1] == b"last" and raw.events == ["eof"]
        t.write(b"bye")
        t.close()
        assert raw.writes[-1] == b"bye" and raw.events == ["eof", "close"]
        t.write(b"after close")  # the transport is closing: dropped, as the transport would
        t.write(b"and more")
        await asyncio.sleep(0)
        assert raw.writes[-1] == b"bye"

    asyncio.run(scenario())


def test_abort_drops_what_is_held() -> None:
    async def scenario() -> None:
        raw = _Transport()
        t = CoalescingTransport(raw, asyncio.get_running_loop())
        t.write(b"held")
        t.abort()
        await asyncio.sleep(0)
        assert raw.writes == [] and raw.events == ["abort"]

    asyncio.run(scenario())


class _Recorder:
    """A transport that records the size of each write it passes on (the socket's writes)."""

    writes: list[int] = []

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport

    def write(self, data: Any) -> None:
        type(self).writes.append(len(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _RecordingProtocol(ServiceProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_Recorder(transport))  # type: ignore[arg-type]


@pytest.mark.parametrize("path", ["/filter", "/prioritize", "/healthz"])
def test_a_live_answer_is_one_socket_write(tmp_path: Any, path: str) -> None:
    """Over a real uvicorn server, a verb's answer and a FastAPI route's (head and body) are each one write of the
    socket's transport; two requests on one keep-alive connection each get theirs whole."""
    body = b'{"Pod":{"metadata":{"name":"p","namespace":"default","uid":"u"}},"NodeNames":["ghost"]}'
    with LiveServer(FileSource(tmp_path, poll_interval=0), protocol=_RecordingProtocol) as srv:
        _Recorder.writes = []  # not the server's readiness probe
        with httpx.Client(base_url=srv.url, timeout=5) as client:
            for _ in range(2):
                if path == "/healthz":
                    answer = client.get(path)
                else:
                    answer = client.post(path, content=body, headers={"content-type": "application/json"})
                assert answer.status_code == 200
                size = len(answer.content)
                assert _Recorder.writes[-1] > size  # head and body together
            assert len(_Recorder.writes) == 2, _Recorder.writes
    if path == "/filter":
        assert answer.json()["FailedNodes"] == {"ghost": "node not found"}
