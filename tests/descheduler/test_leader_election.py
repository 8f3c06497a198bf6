"""Two ``koord descheduler`` processes with an interval share one Lease: only the holder runs rounds
(its /explain answers, its /healthz is 200); the standby serves /healthz 503 and runs nothing."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import httpx

from app.descheduler.cli import DESCHEDULER_KINDS, run
from app.descheduler.config import parse_config
from app.sources.kubernetes import KubernetesSource
from tests.manager.test_leader_election import DURATIONS, FakeLeaseAPI, kubeconfig

from .test_cli import CONFIG


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_only_the_lease_holder_runs_rounds(tmp_path) -> None:
    fake = FakeLeaseAPI()
    try:
        asyncio.run(_go(tmp_path, fake))
    finally:
        fake.httpd.shutdown()


async def _go(tmp_path, fake: FakeLeaseAPI) -> None:
    ports = {"a": _port(), "b": _port()}
    tasks = {}
    for token in ("a", "b"):
        source = KubernetesSource(DESCHEDULER_KINDS, kubeconfig=str(kubeconfig(tmp_path, fake.port, token)))
        tasks[token] = asyncio.create_task(
            run(
                parse_config(CONFIG),
                source,
                dry_run=True,
                interval=0.2,
                host="127.0.0.1",
                port=ports[token],
                leader_elect=True,
                lease=("koordinator-manager", "koordinator-system"),
                durations=DURATIONS,
                identity=token,
            )
        )
        if token == "a":
            for _ in range(300):
                if fake.holder() == "a":
                    break
                await asyncio.sleep(0.05)

    async def get(token: str, path: str) -> int:
        try:
            resp = await asyncio.to_thread(httpx.get, f"http://127.0.0.1:{ports[token]}{path}", timeout=2)
        except httpx.HTTPError:
            return 0
        return resp.status_code

    try:
        for _ in range(300):
            if await get("a", "/explain") == 200 and await get("b", "/healthz") == 503:
                break
            await asyncio.sleep(0.05)
        assert fake.holder() == "a"
        assert await get("a", "/healthz") == 200 and await get("a", "/explain") == 200
        assert await get("b", "/healthz") == 503 and await get("b", "/explain") == 404
    finally:
        for task in tasks.values():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, RuntimeError):
                await task
