"""The app's lifespan runs background tasks (controllers, plugin loops) while serving and stops them after."""

from __future__ import annotations

import asyncio
from pathlib import Path

from fastapi.testclient import TestClient

from app.server.app import create_app
from app.server.state import ServiceState
from app.sources.files import FileSource
from tests.conftest import fake_nodes_cluster


def test_background_task_runs_with_the_state_and_is_cancelled_on_shutdown(tmp_path: Path) -> None:
    seen: list[str] = []

    async def controller(state: ServiceState) -> None:
        seen.append(f"started with {len(state.cache.nodes)} nodes")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    app = create_app(FileSource(fake_nodes_cluster(tmp_path), poll_interval=0), background=[controller])
    with TestClient(app) as client:
        assert client.get("/readyz").status_code == 200
        for _ in range(50):
            if seen:
                break
            client.get("/healthz")
        assert seen == ["started with 3 nodes"]
    assert seen == ["started with 3 nodes", "cancelled"]
