"""The documented descheduler example shows a rebalance: on the example cluster, one round of LowNodeLoad
(``manifests/descheduler/dry-run-example.yaml``) moves the owned pod web-2 off the hot node to the idle one
and skips the bare pod cache-1, naming why, as upstream's evictor does."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from app.cli.main import cli
from tests.conftest import EXAMPLE_CLUSTER

CONFIG = EXAMPLE_CLUSTER.parents[1] / "manifests" / "descheduler" / "dry-run-example.yaml"


def test_the_example_cluster_rebalances() -> None:
    args = ["descheduler", "--cluster", str(EXAMPLE_CLUSTER), "--config", str(CONFIG), "--dry-run", "-o", "json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    round_ = json.loads(result.stdout)
    assert round_["dryRun"] is True
    assert [(e["pod"], e["node"], e["target"]) for e in round_["evictions"]] == [
        ("default/web-2", "node-hot", "node-idle")
    ]
    assert "overutilized" in round_["evictions"][0]["reason"]
    skipped = json.dumps(round_["skipped"])
    assert "cache-1" in skipped and "ownerRefs" in skipped
