"""ElasticQuota, DeviceShare and NodeNUMAResource under kube-scheduler's interleaving (issue 45), over real HTTP.

The same play as ``test_reservation_race_http.py`` (:mod:`tests.plugins.racekit`): each pod's ``/filter`` and
``/prioritize`` run while other pods' ``/bind`` are in flight, binds race each other, and a failed bind requeues
the pod. More pods ask than fit, so the last unit of a quota, a GPU or a core is contended. Each seed must end
with every pod bound once or still pending (none lost, none half-assumed), a quota's ``used`` equal to the sum of
its bound and assumed pods and within its max, no GPU share and no cpu given twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from app.api import elasticquota as eq
from app.api.topology import parse_cpuset
from app.framework.config import PluginSpec, SchedulerConfig
from app.plugins.deviceshare.allocation import parse_allocations
from tests.conftest import LiveServer
from tests.plugins import test_deviceshare as ds
from tests.plugins.elasticquota import fixtures as qf
from tests.plugins.nodenumaresource import kit as numa
from tests.plugins.racekit import Outcome, SchedulerLoop, SlowWrites, requests_of
from tests.plugins.reservation.fixtures import wait_for, write_cluster

SEEDS = [1, 2, 3]


@contextmanager
def _play(
    tmp_path: Path, objects: list[dict[str, Any]], seed: int, config: SchedulerConfig | None = None
) -> Iterator[tuple[LiveServer, Outcome, list[dict[str, Any]]]]:
    """Serve ``objects`` (source writes delayed), schedule their pending pods, and yield the running server,
    the outcome and the pods."""
    source = SlowWrites(write_cluster(tmp_path / "cluster", objects), seed=seed, poll_interval=0)
    with LiveServer(source, config) as srv:
        pods = [o for o in objects if o["kind"] == "Pod" and not o["spec"].get("nodeName")]
        loop = SchedulerLoop(srv.url, [o for o in objects if o["kind"] == "Node"], seed=seed)
        try:
            out = loop.run(pods, rounds=3)
        finally:
            loop.close()
        assert out.overlapped > 0, "no pod was filtered while a bind was in flight: the race was not played"
        yield srv, out, pods


def _no_pod_lost(srv: LiveServer, out: Outcome, pods: list[dict[str, Any]]) -> None:
    """Every pod is bound where kube-scheduler bound it, or pending and not assumed."""
    cache = srv.service.cache
    wait_for(
        lambda: (
            all(
                cache.pods[p["metadata"]["uid"]].uid not in cache.assumed
                for p in pods
                if p["metadata"]["name"] not in out.bound
            )
            or None
        )
    )
    for p in pods:
        info = cache.pods[p["metadata"]["uid"]]
        assert info.node_name == out.bound.get(info.name, ""), info.name


@pytest.mark.parametrize("seed", SEEDS)
def test_quota_used_is_the_sum_of_its_pods(tmp_path: Path, seed: int) -> None:
    # 3 nodes of 8 cpu (24); team-a may use 6 cpu, team-b 5; 10 pods of 1 cpu ask in each
    objects: list[dict[str, Any]] = [qf.node(f"n{i}", "8") for i in range(3)]
    objects += [
        qf.quota("team-a", {"cpu": "4", "memory": "4Gi"}, {"cpu": "6", "memory": "64Gi"}),
        qf.quota("team-b", {"cpu": "4", "memory": "4Gi"}, {"cpu": "5", "memory": "64Gi"}),
    ]
    for team in ("team-a", "team-b"):
        objects += [qf.pod(f"{team}-{i}", "1", quota_name=team, memory="1Gi") for i in range(10)]
    with _play(tmp_path, objects, seed) as (srv, out, pods):
        _no_pod_lost(srv, out, pods)
        manager = srv.service.framework.plugin("ElasticQuota").manager
        for team, limit in (("team-a", 6000), ("team-b", 5000)):
            placed = [
                p
                for p in pods
                if p["metadata"]["labels"][eq.LABEL_QUOTA_NAME] == team
                and srv.service.cache.pods[p["metadata"]["uid"]].node_name
            ]
            want = sum(requests_of(p)["cpu"] for p in placed)
            assert manager.quotas[team].used.get("cpu", 0) == want, team
            assert want <= limit, (team, want)
            assert want == limit, (team, want, out.bind_errors)  # every unit handed out, none twice


@pytest.mark.parametrize("seed", SEEDS)
def test_no_gpu_share_is_given_twice(tmp_path: Path, seed: int) -> None:
    # 2 nodes x 2 GPUs: 8 halves; 12 pods ask for half a GPU each
    objects: list[dict[str, Any]] = []
    for name in ("gpu-a", "gpu-b"):
        objects += [ds.node(name, 2), ds.device(name, 2)]
    objects += [ds.pod(f"share-{i}", {ds.CORE: "50", ds.RATIO: "50"}) for i in range(12)]
    config = SchedulerConfig((PluginSpec("NodeResourcesFit"), PluginSpec("DeviceShare", 1, {})))
    with _play(tmp_path, objects, seed, config) as (srv, out, pods):
        _no_pod_lost(srv, out, pods)
        assert len(out.bound) == 8, out.bind_errors
        cache = srv.service.cache
        wait_for(lambda: all(ds.ANN in cache.pods[f"uid-{n}"].annotations for n in out.bound))
        per_gpu: dict[tuple[str, int], int] = {}
        for name, node_name in out.bound.items():
            for a in parse_allocations(cache.pods[f"uid-{name}"].annotations[ds.ANN]):
                key = (node_name, a.minor)
                per_gpu[key] = per_gpu.get(key, 0) + a.resources[ds.CORE]
        assert per_gpu == {(n, m): 100 for n in ("gpu-a", "gpu-b") for m in (0, 1)}, per_gpu
        plugin = srv.service.framework.plugin("DeviceShare")
        for name in out.bound:
            held = plugin.devices.allocations_of(f"uid-{name}")
            assert held is not None and held[0] == out.bound[name], name


@pytest.mark.parametrize("seed", SEEDS)
def test_no_cpu_is_given_twice(tmp_path: Path, seed: int) -> None:
    # 2 nodes of 16 cpus (1 socket, 8 cores x 2 threads); 20 LSR pods of 2 cpus ask for 40
    objects: list[dict[str, Any]] = []
    for name in ("n1", "n2"):
        objects += [numa.node(name, cpu="16", memory="64Gi"), numa.synthetic_nrt(name, 1, 1, 8, 2)]
    objects += [numa.pod(f"lsr-{i}", "2", memory="256Mi") for i in range(20)]
    with _play(tmp_path, objects, seed) as (srv, out, pods):
        _no_pod_lost(srv, out, pods)
        assert len(out.bound) == 16, out.bind_errors
        cache = srv.service.cache
        status = "scheduling.koordinator.sh/resource-status"
        wait_for(lambda: all(status in cache.pods[f"uid-{n}"].annotations for n in out.bound))
        seen: dict[str, set[int]] = {"n1": set(), "n2": set()}
        for name, node_name in out.bound.items():
            cpus = parse_cpuset(ds_json(cache.pods[f"uid-{name}"].annotations[status])["cpuset"])
            assert len(cpus) == 2 and not cpus & seen[node_name], (name, cpus)
            seen[node_name] |= cpus
        assert all(len(s) == 16 for s in seen.values())


def ds_json(value: str) -> dict[str, Any]:
    """A JSON annotation as a dict."""
    import json

    data: dict[str, Any] = json.loads(value)
    return data
