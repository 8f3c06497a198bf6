"""The ElasticQuota part of /validate-pod (upstream ``pkg/webhook/elasticquota/pod_check.go``):
pods may not join parent quotas, and the ``preemptible`` label is immutable. Over HTTP with
AdmissionReview bodies, and on the cache directly for quota changes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from app.cache.snapshot import ClusterCache
from app.sources.events import Event, EventType
from app.sources.files import FileSource
from tests.conftest import EXAMPLE_CLUSTER, LiveServer
from tests.webhooks.test_pod_webhooks import post, review, sample_pod
from webhooks.pod import quota as podquota
from webhooks.webhook import WebhookContext

NAME = "quota.scheduling.koordinator.sh/name"
PREEMPTIBLE = "quota.scheduling.koordinator.sh/preemptible"
QUOTAS = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: team
  namespace: kube-system
  labels: {quota.scheduling.koordinator.sh/is-parent: "true"}
spec: {max: {cpu: "10"}, min: {cpu: "4"}}
---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: team-a
  namespace: kube-system
  labels: {quota.scheduling.koordinator.sh/parent: team}
spec: {max: {cpu: "10"}, min: {cpu: "2"}}
---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: ns-parent
  namespace: ns-parent
  labels: {quota.scheduling.koordinator.sh/is-parent: "true"}
spec: {max: {cpu: "10"}, min: {cpu: "1"}}
---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: listing
  namespace: kube-system
  labels: {quota.scheduling.koordinator.sh/is-parent: "true"}
  annotations: {quota.scheduling.koordinator.sh/namespaces: '["listed"]'}
spec: {max: {cpu: "10"}, min: {cpu: "1"}}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    cluster = tmp_path_factory.mktemp("cluster")
    for f in EXAMPLE_CLUSTER.iterdir():
        (cluster / f.name).write_text(f.read_text())
    (cluster / "quotas.yaml").write_text(QUOTAS)
    with LiveServer(FileSource(cluster, poll_interval=0)) as srv:
        yield srv


def pod(namespace: str = "default", name: str = "p1", **labels: str) -> dict[str, Any]:
    p = sample_pod(**labels)
    p["metadata"]["namespace"] = namespace
    p["metadata"]["name"] = name
    return p


def validate(srv: LiveServer, body: dict[str, Any]) -> dict[str, Any]:
    return post(srv, "/validate-pod", body)


PARENT_MSG = "pod can not be linked to a parentQuotaGroup,quota:{}, pod:{}"


@pytest.mark.parametrize(
    ("namespace", "labels", "refused_quota"),
    [
        ("default", {NAME: "team"}, "team"),  # label names a parent quota
        ("default", {NAME: "team-a"}, None),  # a leaf quota
        ("default", {NAME: "nope"}, None),  # unknown quota: the default quota
        ("default", {}, None),  # no quota: the default quota
        ("ns-parent", {}, "ns-parent"),  # quota named like the namespace, in it
        ("listed", {}, "listing"),  # quota listing the namespace in its annotation
        ("ns-parent", {NAME: "team-a"}, None),  # the label wins over the namespace
    ],
)
def test_create_in_parent_quota_is_refused(
    server: LiveServer, namespace: str, labels: dict[str, str], refused_quota: str | None
) -> None:
    body = review(pod(namespace, "web-1", **labels))
    response = validate(server, body)
    if refused_quota is None:
        assert response["allowed"] is True, response
        return
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert response["status"]["message"] == PARENT_MSG.format(refused_quota, "web-1")


def test_feature_gate_allows_parent_quota_pods(server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(server.app.state.webhook_context.feature_gates, "SupportParentQuotaSubmitPod", True)
    assert validate(server, review(pod(**{NAME: "team"})))["allowed"] is True


@pytest.mark.parametrize(
    ("old_value", "new_value"),
    [("true", "false"), (None, "false"), ("false", None)],
)
def test_preemptible_label_is_immutable(server: LiveServer, old_value: str | None, new_value: str | None) -> None:
    old = pod(**({PREEMPTIBLE: old_value} if old_value is not None else {}))
    new = pod(**({PREEMPTIBLE: new_value} if new_value is not None else {}))
    response = validate(server, review(new, "UPDATE", old))
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert response["status"]["message"] == "Preemptible label is forbidden modify now."


def test_update_keeping_preemptible_checks_the_parent_rule(server: LiveServer) -> None:
    old = pod(**{PREEMPTIBLE: "false"})
    assert validate(server, review(pod(**{PREEMPTIBLE: "false"}), "UPDATE", old))["allowed"] is True
    moved = pod(**{PREEMPTIBLE: "false", NAME: "team"})
    response = validate(server, review(moved, "UPDATE", old))
    assert response["status"]["message"] == PARENT_MSG.format("team", "p1")


def test_colocation_errors_come_first(server: LiveServer) -> None:
    old = pod(**{"koordinator.sh/qosClass": "LS", PREEMPTIBLE: "true"})
    new = pod(**{"koordinator.sh/qosClass": "BE", PREEMPTIBLE: "false"})
    message = validate(server, review(new, "UPDATE", old))["status"]["message"]
    assert "koordinator.sh/qosClass" in message and "Preemptible" not in message


def _quota(name: str, namespace: str, *, parent: bool) -> dict[str, Any]:
    labels = {"quota.scheduling.koordinator.sh/is-parent": "true"} if parent else {}
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"max": {"cpu": "4"}, "min": {"cpu": "1"}},
    }


def test_quota_changes_are_followed() -> None:
    cache = ClusterCache()
    ctx = WebhookContext(cache)
    p = pod("ns", **{NAME: "q"})
    assert podquota.validate_add_pod(p, "ns", ctx) is None
    cache.apply(Event("ElasticQuota", EventType.ADDED, _quota("q", "ns", parent=True)))
    assert podquota.validate_add_pod(p, "ns", ctx) == PARENT_MSG.format("q", "p1")
    cache.apply(Event("ElasticQuota", EventType.MODIFIED, _quota("q", "ns", parent=False)))
    assert podquota.validate_add_pod(p, "ns", ctx) is None
    cache.apply(Event("ElasticQuota", EventType.MODIFIED, _quota("q", "ns", parent=True)))
    cache.apply(Event("ElasticQuota", EventType.DELETED, _quota("q", "ns", parent=True)))
    assert podquota.validate_add_pod(p, "ns", ctx) is None


def test_resolution_stays_fast_with_many_quotas() -> None:
    cache = ClusterCache()
    for i in range(1000):
        cache.apply(Event("ElasticQuota", EventType.ADDED, _quota(f"q{i}", "ns", parent=i % 2 == 0)))
    ctx = WebhookContext(cache)
    p = pod("ns", **{NAME: "q10"})
    podquota.validate_add_pod(p, "ns", ctx)  # first call builds the tree
    start = time.perf_counter()
    for _ in range(1000):
        assert podquota.validate_add_pod(p, "ns", ctx) == PARENT_MSG.format("q10", "p1")
    assert (time.perf_counter() - start) / 1000 < 0.001
