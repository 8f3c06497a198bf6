"""The lane (app/client/lane.py, aiohttp) that carries binds and watches: answers, reuse, failures, TLS."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
import uvloop

from app.client.aio import AsyncClient
from app.client.config import connection_settings, load_configuration
from app.client.errors import Conflict, ConnectionFailed, NotFound
from app.client.lane import Lane
from tests.client.conftest import TOKEN, write_kubeconfig
from tests.client.fake_apiserver import FakeAPIServer
from tests.client.test_config import PKI

PODS = "/api/v1/namespaces/ns/pods"


def pod(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}, "spec": {}}


async def test_bind_goes_over_one_kept_alive_connection_with_the_token(fake: FakeAPIServer, kubeconfig: str) -> None:
    fake.seed(PODS, pod("a"), pod("b"))
    uids = {name: fake.store[PODS][name]["metadata"]["uid"] for name in ("a", "b")}
    async with AsyncClient.from_config(kubeconfig) as client:
        await client.bind("ns", "a", uids["a"], "n1")
        await client.bind("ns", "b", uids["b"], "n2")
        with pytest.raises(Conflict, match='already assigned to node "n1"'):
            await client.bind("ns", "a", uids["a"], "n3")
        with pytest.raises(NotFound):
            await client.bind("ns", "gone", "uid", "n1")
    binds = [r for r in fake.calls("POST") if r.path.endswith("/binding")]
    assert [r.body["target"]["name"] for r in binds] == ["n1", "n2", "n3", "n1"]
    assert {r.headers["authorization"] for r in binds} == {f"Bearer {TOKEN}"}
    assert binds[0].headers["content-type"] == "application/json"
    assert binds[0].body["metadata"] == {"name": "a", "namespace": "ns", "uid": uids["a"]}
    assert len({r.peer for r in binds[:3]}) == 1, "kept-alive: the binds share one connection"
    assert fake.store[PODS]["b"]["spec"]["nodeName"] == "n2"


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def serve(handler: Handler) -> tuple[asyncio.Server, Lane]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    cfg = load_configuration(
        write_kubeconfig(Path(tempfile.mkdtemp(prefix="lane-")) / "kubeconfig", f"http://127.0.0.1:{port}")
    )
    return server, Lane(connection_settings(cfg))


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0
    )
    return head + await reader.readexactly(length)


async def test_chunked_answers_connection_close_and_a_closed_idle_connection() -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        request = await read_request(reader)
        assert request.startswith(b"POST /x HTTP/1.1\r\n")
        writer.write(b'HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{"a\r\n4\r\n":1}\r\n0\r\n\r\n')
        await reader.readuntil(b"\r\n\r\n")  # the next request on the same connection
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        writer.close()

    server, pool = await serve(handler)
    async with server:
        first = await pool.request("POST", "/x", b"{}")
        assert (first.status, first.content) == (201, b'{"a":1}')
        second = await pool.request("POST", "/x", b"{}")
        assert (second.status, second.headers["connection"]) == (200, "close")
        third = await pool.request("POST", "/x", b"{}")  # the closed connection was not reused
        assert third.status == 201
        assert connections == 2
        await pool.aclose()


async def test_an_answer_cut_short_or_no_server_is_connection_failed() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b'HTTP/1.1 201 Created\r\nContent-Length: 50\r\n\r\n{"short')
        await writer.drain()
        writer.close()

    server, pool = await serve(handler)
    async with server:
        with pytest.raises(ConnectionFailed, match="POST /x: AnswerCutShort: the server closed the connection before"):
            await pool.request("POST", "/x", b"{}")
    server.close()
    await server.wait_closed()
    with pytest.raises(ConnectionFailed, match="POST /x: ConnectionRefusedError"):
        await pool.request("POST", "/x", b"{}")
    await pool.aclose()
    with pytest.raises(ConnectionFailed, match="POST /x: the client is closed"):
        await pool.request("POST", "/x", b"{}")


async def test_a_malformed_answer_or_path_is_connection_failed_and_the_connection_is_not_reused() -> None:
    """Bytes that are not HTTP/1.x are refused with httptools' error and their connection closed; a path holding a
    line break (a header it would inject) is refused before anything is sent."""
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await read_request(reader)
        writer.write(
            b"SSH-2.0-OpenSSH_9.2\r\n" if connections == 1 else b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
        )
        await writer.drain()
        await reader.read()  # until the client closes

    server, pool = await serve(handler)
    async with server:
        with pytest.raises(ConnectionFailed, match="POST /x: HttpParserError: Expected HTTP/"):
            await pool.request("POST", "/x", b"{}")
        assert (await pool.request("POST", "/x", b"{}")).status == 200
        assert connections == 2  # the broken connection was closed, a new one answered
        with pytest.raises(ConnectionFailed, match="the path must be absolute and hold no space or line break"):
            await pool.request("POST", "/x\r\nX-Injected: 1", b"{}")
        assert connections == 2
        await pool.aclose()


async def test_a_silent_server_times_out() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(1)

    server, pool = await serve(handler)
    async with server:
        with pytest.raises(ConnectionFailed, match=r"timed out after 0\.2 s"):
            await pool.request("POST", "/x", b"{}", timeout=0.2)
        await pool.aclose()


@contextlib.contextmanager
def tls_fake(tmp_path: Path) -> Iterator[tuple[FakeAPIServer, PKI, str, str]]:
    """A fake API server over TLS holding pod ns/a: (the fake, its PKI, the pod's uid, a kubeconfig trusting its CA)."""
    pki = PKI(tmp_path)
    fake = FakeAPIServer(tls=pki.server_context(require_client_cert=False))
    try:
        fake.seed(PODS, pod("a"))
        ca = {"certificate-authority-data": base64.b64encode(pki.ca_pem).decode()}
        yield fake, pki, fake.store[PODS]["a"]["metadata"]["uid"], write_kubeconfig(tmp_path / "kc", fake.url, **ca)
    finally:
        fake.close()


def test_bind_over_tls_under_uvloop(tmp_path: Path) -> None:
    """The service runs on uvloop, whose TLS transport is not an asyncio.Transport: binds over it, refusals too."""
    with tls_fake(tmp_path) as (fake, _, uid, kubeconfig):

        async def binds() -> None:
            async with AsyncClient.from_config(kubeconfig) as client:
                await client.bind("ns", "a", uid, "n1")
                with pytest.raises(Conflict, match='already assigned to node "n1"'):
                    await client.bind("ns", "a", uid, "n2")

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(binds())
        assert fake.store[PODS]["a"]["spec"]["nodeName"] == "n1"
        assert len({r.peer for r in fake.calls("POST")}) == 1  # kept alive across the two


async def test_bind_over_tls_checks_the_server_certificate(tmp_path: Path) -> None:
    with tls_fake(tmp_path) as (fake, pki, uid, kubeconfig):
        async with AsyncClient.from_config(kubeconfig) as client:
            await client.bind("ns", "a", uid, "n1")
        assert fake.store[PODS]["a"]["spec"]["nodeName"] == "n1"
        other = {"certificate-authority-data": base64.b64encode(pki.other_ca_pem).decode()}
        async with AsyncClient.from_config(write_kubeconfig(tmp_path / "bad", fake.url, **other)) as client:
            with pytest.raises(ConnectionFailed, match=r"binding pod ns/a to n2 failed.*CERTIFICATE_VERIFY_FAILED"):
                await client.bind("ns", "a", uid, "n2")
