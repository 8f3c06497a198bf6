"""Following kube-scheduler's leader Lease: over real HTTP against the fake API server (holder, expiry,
a missing Lease, a failed read), and a standby service that keeps its cache but writes no quota status
until the Lease names its kube-scheduler."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from app.api.timeparse import format_time
from app.cli.main import cli
from app.client.aio import AsyncClient
from app.client.config import load_configuration
from app.sources.files import FileSource
from app.sources.leaderlease import LeaseFollower, parse_lease_ref
from tests.client.fake_apiserver import FakeAPIServer, status
from tests.conftest import EXAMPLE_CLUSTER, LiveServer
from tests.plugins.test_elasticquota_status import _objects

LEASES = "/apis/coordination.k8s.io/v1/namespaces/koordinator-system/leases"


def lease(holder: str, renewed: float, duration: int = 15) -> dict[str, Any]:
    """A Lease as kube-scheduler's elector writes it (client-go resourcelock), managedFields included."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": "koord-scheduler",
            "namespace": "koordinator-system",
            "managedFields": [
                {
                    "manager": "kube-scheduler",
                    "operation": "Update",
                    "apiVersion": "coordination.k8s.io/v1",
                    "time": format_time(renewed),
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:holderIdentity": {}, "f:renewTime": {}}},
                }
            ],
        },
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "acquireTime": "2026-11-24T00:00:00.000000Z",
            "renewTime": format_time(renewed).replace("Z", ".123456Z"),  # MicroTime, as written
            "leaseTransitions": 3,
        },
    }


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def client(fake: FakeAPIServer, kubeconfig: str) -> AsyncClient:
    return AsyncClient(load_configuration(kubeconfig))


async def test_leads_while_the_lease_names_our_pod_and_is_fresh(fake: FakeAPIServer, client: AsyncClient) -> None:
    clock = Clock()
    fake.seed(LEASES, lease("koord-scheduler-7c9f-abcde_0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", clock.now))
    ours = LeaseFollower(client, "koordinator-system", "koord-scheduler", "koord-scheduler-7c9f-abcde", clock=clock)
    other = LeaseFollower(client, "koordinator-system", "koord-scheduler", "koord-scheduler-7c9f-zzzzz", clock=clock)
    prefix = LeaseFollower(client, "koordinator-system", "koord-scheduler", "koord-scheduler-7c9f", clock=clock)
    for f in (ours, other, prefix):
        await f.poll_once()
    assert ours.leading() and not other.leading()
    assert not prefix.leading()  # a pod name that is only a prefix of the holder's is not the holder
    clock.now += 16  # the lease was not renewed within its 15 s
    assert not ours.leading()
    await client.aclose()


async def test_a_failed_read_keeps_the_last_lease_until_it_expires(fake: FakeAPIServer, client: AsyncClient) -> None:
    clock = Clock()
    fake.seed(LEASES, lease("pod-a_1", clock.now))
    follower = LeaseFollower(client, "koordinator-system", "koord-scheduler", "pod-a", clock=clock)
    await follower.poll_once()
    assert follower.leading()
    fake.fail[("GET", f"{LEASES}/koord-scheduler")] = (500, status(500, "InternalError", "etcd timeout"), {})
    clock.now += 5
    await follower.poll_once()
    assert follower.leading() and follower.read_errors == 1
    clock.now += 11
    await follower.poll_once()
    assert not follower.leading()
    await client.aclose()


async def test_no_lease_means_nobody_leads(fake: FakeAPIServer, client: AsyncClient) -> None:
    follower = LeaseFollower(client, "koordinator-system", "koord-scheduler", "pod-a")
    await follower.poll_once()
    assert not follower.leading() and follower.read_errors == 0
    await client.aclose()


@pytest.mark.parametrize("bad", ["koord-scheduler", "a/b/c", "/x", "x/"])
def test_the_lease_reference_is_namespace_slash_name(bad: str) -> None:
    with pytest.raises(ValueError, match="expected NAMESPACE/NAME"):
        parse_lease_ref(bad)


class StubLeases:
    """A LeaseReader answering one Lease object kept in memory."""

    def __init__(self, holder: str) -> None:
        self.holder = holder

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        return lease(self.holder, time.time())


def test_a_standby_writes_no_quota_status_until_it_leads(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(_objects()))
    leases = StubLeases("other-pod_1")
    follower = LeaseFollower(leases, "koordinator-system", "koord-scheduler", "this-pod", poll_seconds=0.05)
    with LiveServer(FileSource(tmp_path, poll_interval=0), leader=follower) as srv:
        cache = srv.app.state.service.cache

        def used() -> Any:
            obj = cache.objects.get("ElasticQuota", {}).get("koordinator-system/team-a") or {}
            return (obj.get("status") or {}).get("used")

        time.sleep(2.5)  # two and a half status rounds (1 s each)
        assert used() is None
        # the standby still answers the verbs from a warm cache
        assert srv.client.get("/apis/v1/plugins/ElasticQuota/quota/team-a").json()["used"] == {"cpu": "3"}
        leases.holder = "this-pod_2"
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and used() is None:
            time.sleep(0.1)
        assert used() == {"cpu": "3"}


@pytest.mark.parametrize(
    ("lease_ref", "message"),
    [
        ("koordinator-system/koord-scheduler", "needs an API server"),
        ("koord-scheduler", "expected NAMESPACE/NAME"),
    ],
)
def test_the_flag_refuses_what_cannot_work(lease_ref: str, message: str) -> None:
    result = CliRunner().invoke(
        cli, ["scheduler", "--cluster", str(EXAMPLE_CLUSTER), "--follow-leader-lease", lease_ref]
    )
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
