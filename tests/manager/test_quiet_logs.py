"""The manager's logs at INFO say what changed, not every step: one summary line per round for the
batch-resource writes (each node's own line is DEBUG, its reason said once), and leader election's
renewals are DEBUG (the library logs each one at INFO)."""

from __future__ import annotations

import asyncio
import copy
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cache.snapshot import ClusterCache
from app.manager.controllers import SLOControllers, summarize_writes
from app.sources.files import FileSource
from app.sources.leaderelect import LIBRARY_LOGGER, quiet_library_logs
from tests.conftest import EXAMPLE_CLUSTER

CONTROLLERS = "app.manager.controllers"


def _cluster(path: Path, fresh: int, stale: int) -> None:
    """``fresh`` nodes with a live NodeMetric, ``stale`` ones whose NodeMetric expired long ago (their batch
    resources are reset), all shaped as the example's node-idle."""
    nodes = yaml.safe_load((EXAMPLE_CLUSTER / "nodes.yaml").read_text())["items"]
    metrics = list(yaml.safe_load_all((EXAMPLE_CLUSTER / "nodemetrics.yaml").read_text()))
    idle = next(n for n in nodes if n["metadata"]["name"] == "node-idle")
    metric = next(m for m in metrics if m["metadata"]["name"] == "node-idle")
    objs: list[dict[str, Any]] = []
    for i in range(fresh + stale):
        name = f"node-{i:03d}"
        n, m = copy.deepcopy(idle), copy.deepcopy(metric)
        n["metadata"]["name"] = m["metadata"]["name"] = name
        n["metadata"]["labels"]["kubernetes.io/hostname"] = name
        m["status"]["podsMetric"] = []
        if i >= fresh:  # an agent that stopped reporting a day ago
            m["metadata"]["annotations"] = {}
            m["status"]["updateTime"] = "2026-01-01T00:00:00Z"
        objs += [n, m]
    (path / "objects.yaml").write_text(yaml.safe_dump_all(objs))
    (path / "slo-controller-config.yaml").write_text((EXAMPLE_CLUSTER / "slo-controller-config.yaml").read_text())


async def test_one_info_line_per_round_and_per_node_lines_at_debug(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _cluster(tmp_path, fresh=12, stale=3)
    source = FileSource(tmp_path, poll_interval=0)
    cache = ClusterCache()
    controllers = SLOControllers(cache, source)
    await source.start(cache)
    try:
        for _ in range(100):
            if source.ready():
                break
            await asyncio.sleep(0.05)
        with caplog.at_level(logging.DEBUG, logger=CONTROLLERS):
            await controllers.run_once(full=True)
    finally:
        await source.stop()
    mine = [r for r in caplog.records if r.name == CONTROLLERS]
    infos = [r.getMessage() for r in mine if r.levelno == logging.INFO and "batch resources" in r.getMessage()]
    assert len(infos) == 1, infos
    assert infos[0].startswith("batch resources: 12 nodes updated, 3 reset ("), infos
    per_node = [r.getMessage() for r in mine if r.levelno == logging.DEBUG and "batch resources" in r.getMessage()]
    assert len(per_node) == 15
    reset = [m for m in per_node if ": reset (" in m]
    assert len(reset) == 3
    reason = reset[0].split(": reset (", 1)[1].rstrip(")")
    assert reason and reset[0].count(reason) == 1  # the reason once, not once for cpu and once for memory

    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=CONTROLLERS):
        await controllers.run_once(full=True)  # nothing changed: nothing written, nothing said at INFO
    assert not [r for r in caplog.records if r.levelno >= logging.INFO and "batch resources" in r.getMessage()]


def test_summary_wording() -> None:
    from collections import Counter

    assert summarize_writes(Counter({"updated": 1})) == "1 node updated"
    assert summarize_writes(Counter({"reset (NodeMetric expired)": 2})) == "2 nodes reset (NodeMetric expired)"
    assert summarize_writes(Counter({"updated": 4998, "reset (x)": 2})) == "4998 nodes updated, 2 reset (x)"


def test_lease_renewals_are_debug(caplog: pytest.LogCaptureFixture) -> None:
    """The kubernetes package's election logs each renewal at INFO; after quiet_library_logs it is DEBUG:
    dropped at INFO, kept (as DEBUG) when DEBUG is logged. Its warnings stay as they are."""
    quiet_library_logs()
    quiet_library_logs()  # idempotent: one filter
    library = logging.getLogger(LIBRARY_LOGGER)
    assert len(library.filters) == 1
    with caplog.at_level(logging.INFO):
        library.info("leader me has successfully acquired lease")
        library.warning("renewing failed")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [("WARNING", "renewing failed")]
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        library.info("leader me has successfully acquired lease")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("DEBUG", "leader me has successfully acquired lease")
    ]
