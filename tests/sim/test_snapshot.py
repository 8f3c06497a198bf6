"""``koord snapshot``: from the fake API server (real HTTP, real list wire) to cluster files to the service.

Round trip: the snapshot's files, served by ``koord scheduler --cluster``'s source, give the same nodes, pods
and quotas; no Secret is ever requested, no ConfigMap but Koordinator's two (by name), and no container env,
command or unrelated annotation reaches the files. Also from a running service (``--server``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.sim.snapshot import ANNOTATION_SNAPSHOT_UPDATE_TIME, build_snapshot, stamp_metric
from app.sources.files import ANNOTATION_STAMP_UPDATE_TIME, FileSource
from tests.client.conftest import TOKEN, write_kubeconfig
from tests.client.fake_apiserver import FakeAPIServer
from tests.conftest import EXAMPLE_CLUSTER, LiveServer

SECRET_VALUE = "hunter2-do-not-copy"
CONFIG = """plugins:
  - {name: NodeResourcesFit}
  - {name: LoadAwareScheduling}
  - {name: ElasticQuota}
pluginConfig:
  - name: LoadAwareScheduling
    args: {usageThresholds: {cpu: 70, memory: 90}, nodeMetricExpirationSeconds: 300}
"""


def _now(offset: float = 0.0) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset))


def _node(name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "node.koordinator.sh/raw-allocatable": "{}"},
            "managedFields": [{"manager": "kubelet"}],
        },
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}},
    }


def _pod(name: str, node: str | None, quota: str | None = None) -> dict[str, Any]:
    labels = {"app": name}
    if quota:
        labels["quota.scheduling.koordinator.sh/name"] = quota
    container = {
        "name": "main",
        "image": "registry.example/app:1",
        "command": ["/app", "--password", SECRET_VALUE],
        "env": [{"name": "PASSWORD", "value": SECRET_VALUE}],
        "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
    }
    spec: dict[str, Any] = {
        "containers": [container],
        "volumes": [{"name": "creds", "secret": {"secretName": "db"}}, {"name": "scratch", "emptyDir": {}}],
        "serviceAccountName": "app",
        "priority": 9000,
    }
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "labels": labels,
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"env": SECRET_VALUE}),
                "scheduling.koordinator.sh/resource-spec": '{"preferredCPUBindPolicy": "SpreadByPCPUs"}',
            },
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending", "podIP": "10.0.0.7"},
    }


@pytest.fixture
def fake() -> Iterator[FakeAPIServer]:
    f = FakeAPIServer(tokens={TOKEN})
    f.seed("/api/v1/nodes", _node("n1"), _node("n2"))
    f.seed("/api/v1/pods", _pod("web-1", "n1", "team-a"), _pod("web-2", "n2"), _pod("pending-1", None, "team-a"))
    metric = {
        "metadata": {"name": "n1"},
        "status": {"updateTime": _now(-30), "nodeMetric": {"nodeUsage": {"resources": {"cpu": "4", "memory": "8Gi"}}}},
    }
    stale = {"metadata": {"name": "n2"}, "status": {"updateTime": _now(-3600), "nodeMetric": {}}}
    f.seed("/apis/slo.koordinator.sh/v1alpha1/nodemetrics", metric, stale)
    quota = {
        "metadata": {"name": "team-a", "namespace": "team-a"},
        "spec": {"min": {"cpu": "4", "memory": "8Gi"}, "max": {"cpu": "20", "memory": "40Gi"}},
    }
    f.seed("/apis/scheduling.sigs.k8s.io/v1alpha1/elasticquotas", quota)
    f.seed(
        "/apis/scheduling.sigs.k8s.io/v1alpha1/podgroups",
        {"metadata": {"name": "g", "namespace": "team-a"}, "spec": {"minMember": 2}},
    )
    cms = "/api/v1/namespaces/koordinator-system/configmaps"
    f.seed(
        cms,
        {
            "metadata": {"name": "koord-scheduler-extender-config", "namespace": "koordinator-system"},
            "data": {"config.yaml": CONFIG},
        },
    )
    f.seed(cms, {"metadata": {"name": "unrelated", "namespace": "koordinator-system"}, "data": {"token": SECRET_VALUE}})
    f.seed("/api/v1/namespaces/team-a/configmaps", {"metadata": {"name": "app"}, "data": {"password": SECRET_VALUE}})
    f.seed("/api/v1/namespaces/team-a/secrets", {"metadata": {"name": "db"}, "data": {"password": SECRET_VALUE}})
    f.seed("/api/v1/secrets", {"metadata": {"name": "db", "namespace": "team-a"}, "data": {"password": SECRET_VALUE}})
    yield f
    f.close()


def test_snapshot_round_trips_through_the_service(fake: FakeAPIServer, tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake.url)
    out = tmp_path / "snap"
    result = CliRunner().invoke(cli, ["snapshot", "--kubeconfig", kubeconfig, "-o", str(out), "--summary", "json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["objects"] == {
        "Node": 2,
        "Pod": 3,
        "NodeMetric": 2,
        "NodeSLO": 0,
        "Device": 0,
        "ElasticQuota": 1,
        "PodGroup": 1,
        "Reservation": 0,
        "ConfigMap": 1,
    }
    assert summary["dropped"]["spec.containers[].env"] == 3
    assert summary["dropped"]["spec.containers[].command"] == 3
    assert summary["dropped"]["metadata.annotations[kubectl.kubernetes.io/last-applied-configuration]"] == 3
    assert summary["dropped"]["spec.volumes[].secret"] == 3
    assert summary["dropped"]["Node metadata.annotations[node.alpha.kubernetes.io/ttl]"] == 2
    assert summary["nodeMetrics"] == {"fresh": 1, "expired": 1}
    assert "ConfigMap koordinator-system/slo-controller-config" in summary["skipped"]

    # what was asked of the API server: no Secret, and ConfigMaps only Koordinator's two, by name
    paths = [r.path.split("?")[0] for r in fake.calls()]
    assert not [p for p in paths if "secret" in p]
    assert sorted(p for p in paths if "configmaps" in p) == [
        "/api/v1/namespaces/koordinator-system/configmaps/koord-scheduler-extender-config",
        "/api/v1/namespaces/koordinator-system/configmaps/slo-controller-config",
    ]
    assert all(r.method == "GET" for r in fake.calls())

    # nothing secret in the files, no container env
    text = "".join(p.read_text() for p in sorted(out.iterdir()))
    assert SECRET_VALUE not in text and '"env"' not in text and "managedFields" not in text
    pods = json.loads((out / "pods.json").read_text())["items"]
    web = next(p for p in pods if p["metadata"]["name"] == "web-1")
    assert web["spec"]["containers"] == [
        {
            "name": "main",
            "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
        }
    ]
    assert web["metadata"]["annotations"] == {
        "scheduling.koordinator.sh/resource-spec": '{"preferredCPUBindPolicy": "SpreadByPCPUs"}'
    }
    assert web["spec"]["volumes"] == [{"name": "scratch", "emptyDir": {}}]
    assert web["kind"] == "Pod" and web["apiVersion"] == "v1" and web["metadata"]["uid"]
    metrics = {m["metadata"]["name"]: m for m in json.loads((out / "nodemetrics.json").read_text())["items"]}
    assert "updateTime" not in metrics["n1"]["status"]  # fresh: stamped live when loaded
    assert metrics["n1"]["metadata"]["annotations"][ANNOTATION_STAMP_UPDATE_TIME] == "true"
    assert metrics["n2"]["status"]["updateTime"]  # expired an hour ago: stays expired

    # the files, served: same nodes, pods (bound where they were) and quotas
    with LiveServer(FileSource(out, poll_interval=0)) as srv:
        cache = srv.service.cache
        assert sorted(cache.nodes) == ["n1", "n2"]
        assert {p.key: p.node_name for p in cache.pods.values()} == {
            "team-a/web-1": "n1",
            "team-a/web-2": "n2",
            "team-a/pending-1": "",
        }
        assert cache.pods[web["metadata"]["uid"]].requests == {"cpu": 2000, "memory": 4 << 30}
        quotas = srv.client.get("/apis/v1/plugins/ElasticQuota/quotas").json()
        assert quotas["team-a"]["max"] == {"cpu": "20", "memory": "40Gi"}
        assert quotas["team-a"]["used"] == {"cpu": "4", "memory": "8Gi"}  # web-1 by label, web-2 by namespace
        node = srv.client.get("/apis/v1/nodes/n1").json()
        assert node["usage"] == {"cpu": "4", "memory": "8Gi"} and node["nodeMetricAgeSeconds"] < 60

    # whatif without --config: the snapshot's configuration (named snapshot) against the defaults
    result = CliRunner().invoke(cli, ["sim", "whatif", "--cluster", str(out), "-o", "json", "--quiet", "--jobs", "1"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert [c["name"] for c in body["configurations"]] == ["snapshot", "defaults"]
    snap = body["configurations"][0]
    assert snap["estimated"]["thresholds"] == {"cpu": 70, "memory": 90}
    assert snap["placements"] == {"team-a/pending-1": snap["placements"]["team-a/pending-1"]}
    assert snap["placed"] == 1
    assert snap["quotas"]["team-a"]["used"] == {"cpu": "6", "memory": "12Gi"}  # and pending-1, placed


def test_snapshot_from_a_running_service(tmp_path: Path) -> None:
    out = tmp_path / "snap"
    with LiveServer(FileSource(EXAMPLE_CLUSTER, poll_interval=0)) as srv:
        result = CliRunner().invoke(cli, ["snapshot", "--server", srv.url, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "files to" in result.output and "DROPPED (NOT READ BY THE PLUGINS)" in result.output
    pods = {p["metadata"]["name"]: p for p in json.loads((out / "pods.json").read_text())["items"]}
    assert set(pods) == {"web-1", "web-2", "api-1", "spark-exec-1", "cache-1", "batch-job-1"}
    assert "image" not in pods["web-1"]["spec"]["containers"][0]
    configmaps = json.loads((out / "configmaps.json").read_text())["items"]
    names = sorted(c["metadata"]["name"] for c in configmaps)
    assert names == ["koord-scheduler-extender-config", "slo-controller-config"]
    # the configuration the service runs with (every plugin, default args) is the snapshot's
    result = CliRunner().invoke(
        cli, ["sim", "whatif", "--cluster", str(out), "--pending", "-o", "json", "--quiet", "--jobs", "1"]
    )
    assert result.exit_code == 0, result.output
    a, b = json.loads(result.stdout)["configurations"]
    assert (a["name"], b["name"]) == ("snapshot", "defaults") and a["placements"] == b["placements"]


def test_snapshot_bad_inputs(tmp_path: Path) -> None:
    runner = CliRunner()
    # with --server the kubeconfig gives the credentials: a named one that cannot be loaded is an error
    missing = str(tmp_path / "missing")
    both = runner.invoke(
        cli, ["snapshot", "--server", "http://127.0.0.1:1", "--kubeconfig", missing, "-o", str(tmp_path)]
    )
    assert both.exit_code == 2 and "no usable kubeconfig" in both.output
    gone = runner.invoke(cli, ["snapshot", "--server", "http://127.0.0.1:1", "-o", str(tmp_path)])
    assert gone.exit_code == 2 and "cannot reach" in gone.output
    no_config = runner.invoke(cli, ["snapshot", "--kubeconfig", str(tmp_path / "missing"), "-o", str(tmp_path)])
    assert no_config.exit_code == 2 and "no usable kubeconfig" in no_config.output


def test_a_fresh_metric_is_stamped_live_and_an_expired_one_left_expired() -> None:
    now = time.time()
    fresh = {"metadata": {"name": "n"}, "status": {"updateTime": _now(-10)}}
    stamped, is_fresh = stamp_metric(fresh, now, 180)
    assert is_fresh and "updateTime" not in stamped["status"]
    assert stamped["metadata"]["annotations"][ANNOTATION_SNAPSHOT_UPDATE_TIME] == fresh["status"]["updateTime"]
    old = {"metadata": {"name": "n"}, "status": {"updateTime": _now(-200)}}
    assert stamp_metric(old, now, 180) == (old, False)
    assert stamp_metric(old, now, 300)[1] is True  # the configuration's own expiration decides
    snap = build_snapshot({"NodeMetric": [old]}, [], taken_at=now)
    assert (snap.fresh_metrics, snap.expired_metrics) == (0, 1)


def test_the_service_trims_pods_before_they_leave_it(tmp_path: Path) -> None:
    """``GET /apis/v1/snapshot``: pods come trimmed (no env crosses the wire), with what was dropped and the
    plugin configuration the service runs with."""
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    node = {"apiVersion": "v1", "kind": "Node", **_node("n1")}
    pod = {"apiVersion": "v1", "kind": "Pod", **_pod("web-1", "n1")}
    (cluster / "c.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node, pod]}))
    with LiveServer(FileSource(cluster, poll_interval=0)) as srv:
        answer = srv.client.get("/apis/v1/snapshot")
    assert answer.status_code == 200
    body = answer.json()
    assert SECRET_VALUE not in answer.text
    assert [p["metadata"]["name"] for p in body["objects"]["Pod"]] == ["web-1"]
    assert body["dropped"]["spec.containers[].env"] == 1
    assert [p["name"] for p in body["config"]["plugins"]][:2] == ["NodeResourcesFit", "LoadAwareScheduling"]
    assert [n["metadata"]["name"] for n in body["objects"]["Node"]] == ["n1"]
