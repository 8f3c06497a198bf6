"""Agent pieces without real cgroups: layout, executor on fake trees, upstream formulas, reporting, CLI."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from typer.testing import CliRunner

from agent.cgroups import CgroupDriver, CgroupLayout, CgroupPathError, CgroupVersion, format_cpuset, parse_cpuset
from agent.collectors.hostapps import HostApp, host_app_dir, host_apps_of
from agent.collectors.node import ProcessorInfo
from agent.daemon import parse_feature_gates
from agent.evictor import APIEvictor
from agent.executor import CgroupExecutor, CgroupWrite
from agent.metriccache import MetricCache, percentile
from agent.qos.cpuset_picker import pick_cpus
from agent.qos.cpusuppress import calculate_suppress, cfs_quota_target
from agent.qos.evict import cpu_to_release, memory_to_release, satisfaction_config_error, sort_be_by_memory
from agent.qos.isolation import PAGE_SIZE, batch_cfs_quota, batch_cpu_shares, memory_qos_values
from agent.reporter import APIMetricWriter, CollectPolicy, build_status
from agent.states.nodeslo import merged_spec
from agent.states.pods import pod_meta
from agent.states.providers import APIServerStates
from app.api.slo import HostApplicationSpec
from app.cli.main import cli
from app.client.sync import Client


def v2_tree(tmp_path: Path) -> CgroupLayout:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cgroup.controllers").write_text("cpu memory cpuset")
    be = tmp_path / "kubepods" / "besteffort"
    be.mkdir(parents=True)
    (be / "cpu.weight").write_text("100")
    (be / "cpu.max").write_text("max 100000")
    (be / "memory.max").write_text("max")
    return CgroupLayout.detect(tmp_path, "kubepods")


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def cgroup_write(self, resource: str, result: str) -> None:
        self.seen.append((resource, result))


# -- layout ----------------------------------------------------------------------------------------


def test_layout_detects_v1_and_v2_and_names_dirs_as_the_kubelet(tmp_path: Path) -> None:
    (tmp_path / "v1" / "cpu").mkdir(parents=True)
    v1 = CgroupLayout.detect(tmp_path / "v1", "kubepods")
    assert (v1.version, v1.driver) == (CgroupVersion.V1, CgroupDriver.CGROUPFS)
    assert v1.pod_dir("abc-1", "BestEffort") == "kubepods/besteffort/podabc-1"
    assert v1.pod_dir("abc-1", "Guaranteed") == "kubepods/podabc-1"
    assert (
        v1.file_path("cpu.cfs_quota_us", "kubepods/burstable")
        == tmp_path / "v1/cpu/kubepods/burstable/cpu.cfs_quota_us"
    )
    sd = CgroupLayout.detect(tmp_path / "v1", "kubepods.slice")
    assert sd.driver == CgroupDriver.SYSTEMD
    assert sd.pod_dir("ab-12", "Burstable") == (
        "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podab_12.slice"
    )
    assert sd.container_dir("p", "containerd://0af") == "p/cri-containerd-0af.scope"
    v2 = v2_tree(tmp_path / "v2")
    assert v2.version == CgroupVersion.V2
    assert v2.file_path("cpu.shares", "kubepods/besteffort") == tmp_path / "v2/kubepods/besteffort/cpu.weight"


@pytest.mark.parametrize("uid", ["../../etc", "a/b", "", ".."])
def test_a_uid_that_would_escape_the_root_is_rejected(tmp_path: Path, uid: str) -> None:
    layout = CgroupLayout(root=tmp_path)
    with pytest.raises(CgroupPathError):
        layout.pod_dir(uid, "BestEffort")


def test_dirs_outside_kubepods_and_bad_container_ids_are_rejected(tmp_path: Path) -> None:
    layout = CgroupLayout(root=tmp_path)
    with pytest.raises(CgroupPathError, match="outside"):
        layout.dir_path("cpu", "kubepods/../system.slice")
    with pytest.raises(CgroupPathError):
        layout.container_dir("kubepods/podx", "docker://../../x")
    with pytest.raises(CgroupPathError):
        CgroupLayout.detect(tmp_path, "/abs")


def test_cpuset_round_trip() -> None:
    assert parse_cpuset("0-3,8, 10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert format_cpuset([5, 0, 1, 2, 8]) == "0-2,5,8"
    with pytest.raises(ValueError):
        parse_cpuset("3-1")


# -- executor --------------------------------------------------------------------------------------


def test_executor_maps_v2_names_and_values(tmp_path: Path) -> None:
    layout = v2_tree(tmp_path)
    rec = Recorder()
    ex = CgroupExecutor(layout, recorder=rec)
    be = "kubepods/besteffort"
    assert ex.update(CgroupWrite("cpu.shares", be, "1024"))
    assert (tmp_path / be / "cpu.weight").read_text() == str(1 + (1024 - 2) * 9999 // 262142)
    assert ex.update(CgroupWrite("cpu.cfs_quota_us", be, "50000"))
    assert (tmp_path / be / "cpu.max").read_text() == "50000"
    assert ex.update(CgroupWrite("cpu.cfs_quota_us", be, "-1"))
    assert (tmp_path / be / "cpu.max").read_text() == "max"
    assert not ex.update(CgroupWrite("cpu.cfs_quota_us", be, "-1")), "unchanged values are skipped"
    assert ("cpu.cfs_quota_us", "unchanged") in rec.seen


@pytest.mark.parametrize(
    ("resource", "value", "result"),
    [
        ("cpu.shares", "1", "out_of_bounds"),
        ("cpu.shares", "300000", "out_of_bounds"),
        ("cpu.cfs_quota_us", "10", "out_of_bounds"),
        ("cpuset.cpus", "x", "invalid"),
        ("nope", "1", "invalid"),
    ],
)
def test_executor_refuses_out_of_bounds_values(tmp_path: Path, resource: str, value: str, result: str) -> None:
    layout = v2_tree(tmp_path)
    rec = Recorder()
    assert not CgroupExecutor(layout, recorder=rec).update(CgroupWrite(resource, "kubepods/besteffort", value))
    assert rec.seen[-1][1] == result
    assert (tmp_path / "kubepods/besteffort/cpu.weight").read_text() == "100"


def test_executor_skips_missing_files_and_dirs_outside_and_honours_dry_run(tmp_path: Path) -> None:
    layout = v2_tree(tmp_path)
    rec = Recorder()
    ex = CgroupExecutor(layout, recorder=rec, dry_run=True)
    assert not ex.update(CgroupWrite("memory.low", "kubepods/besteffort", "10"))
    assert not ex.update(CgroupWrite("cpu.shares", "../etc", "10"))
    assert ex.update(CgroupWrite("memory.limit_in_bytes", "kubepods/besteffort", "1048576"))
    assert (tmp_path / "kubepods/besteffort/memory.max").read_text() == "max", "dry-run writes nothing"
    assert [r for _, r in rec.seen] == ["missing", "invalid", "dry_run"]
    assert ex.planned[0].value == "1048576"


# -- formulas (upstream test tables) -----------------------------------------------------------------


def _pod(uid: str, qos: str, priority: int | None = None, name: str | None = None) -> Any:
    return pod_meta(
        {
            "metadata": {
                "uid": uid,
                "name": name or uid,
                "namespace": "ns",
                "labels": {"koordinator.sh/qosClass": qos},
            },
            "spec": {"priority": priority, "containers": [{"name": "c"}]},
            "status": {"qosClass": "BestEffort" if qos == "BE" else "Burstable"},
        },
        None,
    )


def test_suppress_formula_matches_upstream() -> None:
    """calculateBESuppressCPU: 96 cores at 70 %, node 40 used, LS 20, BE 10 -> system 10, 67200 - 20000 - 10000."""
    pods = [_pod("ls", "LS"), _pod("be", "BE")]
    suppress, ls = calculate_suppress(96_000, 40.0, {"ls": 20.0, "be": 10.0}, pods, 70, None, 0)
    assert (suppress, ls) == (96_000 * 70 // 100 - 20_000 - 10_000, 20.0)
    suppress, _ = calculate_suppress(96_000, 40.0, {"ls": 20.0, "unknown": 5.0}, pods, 70, None, 12_000)
    assert suppress == 67_200 - 25_000 - 15_000, "unknown pods count as LS, system is max(..., reserved)"
    suppress, _ = calculate_suppress(4_000, 4.0, {"ls": 4.0}, pods, 65, 10, 0)
    assert suppress == 400, "cpuSuppressMinPercent floors the target"


def _app(name: str, qos: str, base: str = "") -> HostApp:
    return HostApp(name=name, qos=qos, priority="", base=base, dir=f"x/{name}")


def test_suppress_counts_host_applications_as_upstream() -> None:
    """NonBEHostAppFilter: a host app is BE only with QoS BE *and* under the besteffort dir; every measured
    app leaves the system share; an app without a measurement counts nowhere (CalculateFilterPodsUsed)."""
    pods = [_pod("ls", "LS"), _pod("be", "BE")]
    apps = [
        _app("ls-daemon", "LS", "KubepodsBurstable"),  # non-BE: 3 cores
        _app("be-in-be-dir", "BE", "KubepodsBesteffort"),  # BE: 2 cores
        _app("be-at-root", "BE", "CgroupRoot"),  # BE qos but not under besteffort: non-BE, 1 core
        _app("silent", "LS"),  # no measurement
    ]
    used = {"ls-daemon": 3.0, "be-in-be-dir": 2.0, "be-at-root": 1.0}
    suppress, ls = calculate_suppress(96_000, 40.0, {"ls": 20.0, "be": 10.0}, pods, 70, None, 0, apps, used)
    # system = 40 - 30 (pods) - 6 (apps) = 4; non-BE apps = 3 + 1
    assert (suppress, ls) == (67_200 - 20_000 - 4_000 - 4_000, 20.0)
    # without host apps the same usage is all system (as before the NodeSLO declared them)
    suppress, _ = calculate_suppress(96_000, 40.0, {"ls": 20.0, "be": 10.0}, pods, 70, None, 0)
    assert suppress == 67_200 - 20_000 - 10_000
    # system never below the node reservation, apps or not
    suppress, _ = calculate_suppress(96_000, 40.0, {"ls": 20.0, "be": 10.0}, pods, 70, None, 8_000, apps, used)
    assert suppress == 67_200 - 20_000 - 4_000 - 8_000


def test_host_app_cgroup_dirs_follow_upstream(tmp_path: Path) -> None:
    """GetHostAppCgroupRelativePath: default dirs by QoS without cgroupPath, else base + parentDir + relativePath."""
    layout = v2_tree(tmp_path)

    def spec(**kw: Any) -> HostApplicationSpec:
        return HostApplicationSpec.model_validate(kw)

    assert host_app_dir(layout, spec(name="nginx", qos="LS")) == "host-latency-sensitive/nginx"
    assert host_app_dir(layout, spec(name="job", qos="BE")) == "host-best-effort/job"
    assert host_app_dir(layout, spec(name="plain")) == "plain"
    cases = {
        "CgroupRoot": "sys/app",
        "Kubepods": "kubepods/sys/app",
        "KubepodsBurstable": "kubepods/burstable/sys/app",
        "KubepodsBesteffort": "kubepods/besteffort/sys/app",
    }
    for base, want in cases.items():
        got = host_app_dir(layout, spec(name="a", cgroupPath={"base": base, "parentDir": "sys", "relativePath": "app"}))
        assert got == want, base
    with pytest.raises(CgroupPathError):
        host_app_dir(layout, spec(name="evil", cgroupPath={"base": "CgroupRoot", "relativePath": "../../etc"}))
    # invalid entries are left out, the rest kept
    apps = host_apps_of(layout, [spec(qos="LS"), spec(name="ok", qos="BE")])
    assert [(a.name, a.dir) for a in apps] == [("ok", "host-best-effort/ok")]


def test_cfs_quota_steps() -> None:
    assert cfs_quota_target(-500, 100_000, 2_000) == 2000, "floor 2000 even for a tiny delta"
    assert cfs_quota_target(1_000, 99_000, 2_000) is None, "|delta| < 1% of capacity: bypass"
    assert cfs_quota_target(2_000, 100_000, 2_000) == 120_000, "increase limited to 10% of capacity per round"
    assert cfs_quota_target(2_000, -1, 2_000) == 200_000, "first set is not limited"


def test_cpuset_picker_pairs_ht_siblings_first() -> None:
    procs = [ProcessorInfo(c, c % 4, 0, 0) for c in range(8)]  # cpu c and c+4 are siblings
    assert sorted(pick_cpus(4, procs)) == [0, 1, 4, 5]
    assert sorted(pick_cpus(3, procs)) == [0, 1, 4]
    assert pick_cpus(9, procs) == []


def test_memory_evict_release_and_order() -> None:
    gi = 1 << 30
    assert memory_to_release(75 * gi // 100, gi, 70, None) == gi * (75 - 68) // 100
    assert memory_to_release(69 * gi // 100, gi, 70, None) == 0
    pods = [_pod("a", "BE", 5000), _pod("b", "BE", 5000), _pod("c", "BE", 4000), _pod("d", "BE", 5000)]
    ordered = sort_be_by_memory(pods, {"a": 10.0, "b": 20.0, "c": 1.0})
    assert [p.uid for p in ordered] == ["c", "b", "a", "d"]


def test_cpu_evict_satisfaction() -> None:
    assert satisfaction_config_error(None, 80) is not None
    assert "must (0,60]" in (satisfaction_config_error(61, 80) or "")
    assert (
        satisfaction_config_error(40, 30)
        == "CPUEvictBESatisfactionUpperPercent(30) < CPUEvictBESatisfactionLowerPercent(40)"
    )
    assert satisfaction_config_error(40, 80) is None
    assert cpu_to_release(10_000, 3_000, 40, 80) == 5_000
    assert cpu_to_release(10_000, 5_000, 40, 80) == 0


def test_batch_and_memory_qos_values() -> None:
    assert [batch_cpu_shares(v) for v in (0, 1, 1000, 500_000)] == [2, 2, 1024, 262144]
    assert [batch_cfs_quota(v) for v in (None, 0, 5, 2000)] == [-1, -1, 1000, 200_000]
    gi = 1 << 30
    assert memory_qos_values(gi, 2 * gi, 100, 0, 80) == (gi, gi, (gi + gi * 80 // 100) // PAGE_SIZE * PAGE_SIZE)
    assert memory_qos_values(gi, 2 * gi, 0, 50, 0) == (0, gi // 2, -1)


def test_percentile_and_bounded_cache() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.9) == 90.0 and percentile(values, 0.5) == 50.0 and percentile(values[:1], 0.5) == 1.0
    cache = MetricCache(1.0, 10)
    for t in range(100):
        cache.append("k", float(t), float(t))
    agg = cache.aggregate("k", 0, 100)
    assert agg is not None and agg.count == 14, "retention bounds the series"


def test_nodeslo_defaults_and_malformed_specs() -> None:
    spec = merged_spec(None)
    assert spec.resource_used_threshold_with_be is not None
    assert spec.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 65
    assert spec.resource_used_threshold_with_be.cpu_suppress_policy == "cpuset"
    over = merged_spec({"spec": {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 50}}})
    assert over.resource_used_threshold_with_be is not None
    assert (over.resource_used_threshold_with_be.enable, over.resource_used_threshold_with_be.cpu_suppress_policy) == (
        True,
        "cpuset",
    )
    bad = merged_spec({"spec": {"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": "lots"}}})
    assert bad.resource_used_threshold_with_be is not None
    assert bad.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 65


def test_feature_gates() -> None:
    assert parse_feature_gates("BEMemoryEvict=true,BECPUSuppress=false") == {"BEMemoryEvict", "CPUBurst", "RdtResctrl"}
    assert "BlkIOReconcile" in parse_feature_gates("BlkIOReconcile=true")
    with pytest.raises(ValueError, match="invalid feature gate"):
        parse_feature_gates("Nope=true")


def test_status_skips_cold_aggregates() -> None:
    cache = MetricCache(1.0, 2000)
    for t in range(120):
        cache.append("node_cpu", 1000.0 + t, 1.5)
        cache.append("node_memory", 1000.0 + t, 1 << 30)
    status = build_status(cache, [], 1119.0, CollectPolicy())
    assert status is not None
    assert status["nodeMetric"]["nodeUsage"]["resources"] == {"cpu": "1500m", "memory": "1Gi"}
    agg = status["nodeMetric"]["aggregatedNodeUsages"]
    assert agg[0]["duration"] == "5m0s" and agg[0]["usage"]["p90"] == {}, "119 s of samples < half of 5 m"


# -- Kubernetes mode against a fake API server --------------------------------------------------------------


class FakeAPI:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.objects: dict[str, dict[str, Any]] = {}


@pytest.fixture
def fake_api() -> Iterator[tuple[FakeAPI, Client]]:
    state = FakeAPI()

    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> Any:
            n = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(n)) if n else None

        def do_GET(self) -> None:
            state.requests.append(("GET", self.path, None))
            path = self.path.split("?")[0]
            if path == "/api/v1/pods":
                pod = {"metadata": {"name": "p", "namespace": "d", "uid": "u1"}, "spec": {"nodeName": "n1"}}
                self._send(200, {"items": [pod]})
            elif path in state.objects:
                self._send(200, state.objects[path])
            else:
                self._send(404, {"kind": "Status", "message": "not found"})

        def do_POST(self) -> None:
            body = self._body()
            state.requests.append(("POST", self.path, body))
            if self.path.endswith("/nodemetrics"):
                obj = {**body, "metadata": {**body["metadata"], "resourceVersion": "1"}}
                state.objects[f"{self.path}/{body['metadata']['name']}"] = obj
                self._send(201, obj)
            elif self.path.endswith("/eviction") and "pdb" in self.path:
                self._send(
                    429,
                    {"kind": "Status", "message": "Cannot evict pod as it would violate the pod's disruption budget."},
                )
            else:
                self._send(201, body)

        def do_PUT(self) -> None:
            body = self._body()
            state.requests.append(("PUT", self.path, body))
            self._send(200, body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    cfg = kubernetes.client.Configuration()
    cfg.host = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with Client(cfg) as client:
            yield state, client
    finally:
        server.shutdown()


def test_api_writer_creates_the_nodemetric_then_updates_its_status(fake_api: tuple[FakeAPI, Any]) -> None:
    state, api = fake_api
    status = {"updateTime": "2026-01-01T00:00:00Z", "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1"}}}}
    APIMetricWriter(api).write("n1", CollectPolicy().spec(), status)
    methods = [(m, p) for m, p, _ in state.requests]
    base = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
    assert methods == [("GET", f"{base}/n1"), ("POST", base), ("PUT", f"{base}/n1/status")]
    put = state.requests[-1][2]
    assert put["status"] == status and put["metadata"]["resourceVersion"] == "1"


def test_api_states_and_evictor(fake_api: tuple[FakeAPI, Any]) -> None:
    state, api = fake_api
    states = APIServerStates("n1", api)
    assert states.refresh()
    assert [p["metadata"]["name"] for p in states.pods] == ["p"] and states.node_slo is None
    assert ("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1", None) in state.requests
    ev = APIEvictor("n1", api)
    be = pod_meta({"metadata": {"name": "p", "namespace": "d", "uid": "u1"}}, None)
    assert ev.evict(be, "trigger by koordlet feature BEMemoryEvict")
    eviction = next(b for m, p, b in state.requests if p.endswith("/eviction"))
    assert eviction["deleteOptions"] == {"preconditions": {"uid": "u1"}}
    assert any(p == "/api/v1/namespaces/d/events" for _, p, _ in state.requests)
    blocked = pod_meta({"metadata": {"name": "pdb", "namespace": "d", "uid": "u2"}}, None)
    assert not ev.evict(blocked, "x"), "a PDB refusal (429) is reported, not raised"


# -- CLI ------------------------------------------------------------------------------------------------


def test_cli_rejects_bad_options(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(cli, ["agent", "--node-name", "n", "--feature-gates", "Bogus=true", "--cluster", str(tmp_path)])
    assert res.exit_code == 2 and "invalid feature gate" in res.output
    res = runner.invoke(cli, ["agent", "--node-name", "n", "--kubepods", "../x", "--cluster", str(tmp_path)])
    assert res.exit_code == 2 and "kubepods" in res.output
    res = runner.invoke(cli, ["agent", "--node-name", "n", "--cluster", str(tmp_path / "missing")])
    assert res.exit_code == 2 and "no such file" in res.output


# -- kubelet /pods discovery over HTTPS (token + CA as a kubelet client) ---------------------------------------


@pytest.fixture
def fake_kubelet(tmp_path: Path) -> Iterator[tuple[str, Path, Path, list[dict[str, str]]]]:
    """An HTTPS ``/pods`` endpoint with a certificate for 127.0.0.1 signed by a throw-away CA; it answers 401
    unless the request carries ``Bearer kubelet-token``. Yields (url, token file, CA file, request headers)."""
    import ssl

    from cryptography.hazmat.primitives import serialization

    from app.cli.certs import _pem_key, new_ca, new_serving_cert

    ca, ca_key = new_ca("kubelet-test-ca", days=1)
    cert, key = new_serving_cert(ca, ca_key, ["localhost"], ["127.0.0.1"], days=1)
    (tmp_path / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "tls.key").write_bytes(_pem_key(key))
    (tmp_path / "token").write_text("kubelet-token\n")
    seen: list[dict[str, str]] = []
    pods = {
        "kind": "PodList",
        "apiVersion": "v1",
        "items": [
            {"metadata": {"name": "mine", "namespace": "d", "uid": "u1"}, "spec": {"nodeName": "n1"}},
            {"metadata": {"name": "static", "namespace": "kube-system", "uid": "u2"}, "spec": {}},
            {"metadata": {"name": "other", "namespace": "d", "uid": "u3"}, "spec": {"nodeName": "n2"}},
        ],
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
            ok = self.path == "/pods" and self.headers.get("Authorization") == "Bearer kubelet-token"
            data = json.dumps(pods if ok else {"kind": "Status", "message": "Unauthorized"}).encode()
            self.send_response(200 if ok else 401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/", tmp_path / "token", tmp_path / "ca.crt", seen
    finally:
        server.shutdown()


def test_kubelet_pods_discovery_with_token_and_ca(
    fake_api: tuple[FakeAPI, Any], fake_kubelet: tuple[str, Path, Path, list[dict[str, str]]], tmp_path: Path
) -> None:
    """Pods come from the kubelet's /pods (verified against the CA, with the bearer token), the kind is filled
    in, pods bound to other nodes are dropped (static pods without nodeName kept); Node, NodeSLO and
    NodeMetric still come from the API server, and the pod list is not asked of the API server."""
    state, api = fake_api
    url, token, ca, seen = fake_kubelet
    states = APIServerStates("n1", api, kubelet_url=url, kubelet_token=token, kubelet_ca=ca)
    assert "kubelet:" + url.rstrip("/") in states.description
    assert states.refresh()
    assert [p["metadata"]["name"] for p in states.pods] == ["mine", "static"]
    assert all(p["kind"] == "Pod" and p["apiVersion"] == "v1" for p in states.pods)
    assert seen[-1]["path"] == "/pods" and seen[-1]["authorization"] == "Bearer kubelet-token"
    assert seen[-1]["accept"] == "application/json"
    assert not any(p.startswith("/api/v1/pods") for _, p, _ in state.requests)
    assert ("GET", "/api/v1/nodes/n1", None) in state.requests
    assert not states.refresh(), "same answer: nothing changed"


def test_kubelet_discovery_refuses_an_untrusted_certificate_and_a_wrong_token(
    fake_api: tuple[FakeAPI, Any], fake_kubelet: tuple[str, Path, Path, list[dict[str, str]]], tmp_path: Path
) -> None:
    _, api = fake_api
    url, token, ca, _ = fake_kubelet
    from agent.states.providers import StatesError

    untrusted = APIServerStates("n1", api, kubelet_url=url, kubelet_token=token, kubelet_ca=None)
    with pytest.raises(StatesError, match="CERTIFICATE_VERIFY_FAILED"):
        untrusted.refresh()
    insecure = APIServerStates("n1", api, kubelet_url=url, kubelet_token=token, kubelet_ca=None, kubelet_insecure=True)
    assert insecure.refresh() and len(insecure.pods) == 2
    (tmp_path / "bad-token").write_text("nope")
    wrong = APIServerStates("n1", api, kubelet_url=url, kubelet_token=tmp_path / "bad-token", kubelet_ca=ca)
    with pytest.raises(StatesError, match="401"):
        wrong.refresh()


# -- agent internals kept light ----------------------------------------------------------------------------------


def test_embedded_agent_imports_neither_kubernetes_nor_numpy() -> None:
    """The embedded mode's modules load without the Kubernetes client, httpx and numpy (resident memory)."""
    import subprocess
    import sys

    code = (
        "import sys, agent.cli, agent.daemon, agent.reporter, agent.evictor, agent.states.providers\n"
        "import app.api.metricsserver\n"
        "print(sorted(m for m in ('kubernetes', 'numpy', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_open_files_reread_fresh_content_and_follow_removal(tmp_path: Path) -> None:
    from agent.cgroups import OpenFiles, parse_memory_stat

    f = tmp_path / "value"
    f.write_text("1\n")
    files = OpenFiles(limit=1)
    assert files.read(str(f)) == b"1\n" and len(files) == 1
    f.write_text("22\n")
    assert files.read(str(f)) == b"22\n", "pread at offset 0 reads the current content"
    g = tmp_path / "other"
    g.write_text("x")
    assert files.read(str(g)) == b"x" and len(files) == 1, "over the limit files are not kept open"
    f.unlink()
    files.retain(lambda p: False)
    assert len(files) == 0
    with pytest.raises(OSError):
        files.read(str(f))
    stat = b"cache 1\ntotal_inactive_anon 10\ninactive_anon 5\ntotal_active_anon 20\ntotal_unevictable 3\n"
    assert parse_memory_stat(stat, (b"total_inactive_anon ", b"total_active_anon ", b"total_unevictable ")) == 33
    assert parse_memory_stat(stat, (b"inactive_anon ", b"active_anon ")) == 5


def test_isolation_is_planned_again_only_when_states_change(tmp_path: Path) -> None:
    """On a fake v2 tree: the first round writes the BE pod's batch values; later rounds do not plan or read
    again until the pod set changes or the reconcile interval passes, and the reconcile repairs drift."""
    from agent.daemon import Agent, AgentConfig
    from agent.evictor import RecordingEvictor
    from agent.states.providers import FileStates

    layout = v2_tree(tmp_path / "cg")
    pod_dir = tmp_path / "cg" / "kubepods" / "besteffort" / "podbe1"
    pod_dir.mkdir()
    for name, value in (("cpu.weight", "100"), ("cpu.max", "max 100000"), ("memory.max", "max")):
        (pod_dir / name).write_text(value)
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    be = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "be", "namespace": "d", "uid": "be1", "labels": {"koordinator.sh/qosClass": "BE"}},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "resources": {"requests": {"kubernetes.io/batch-cpu": "1000"}, "limits": {}}}],
        },
        "status": {"phase": "Running", "qosClass": "BestEffort"},
    }
    (cluster / "pods.json").write_text(json.dumps({"kind": "List", "items": [be]}))
    config = AgentConfig(node_name="n1", states_interval=0, reconcile_interval=30.0, features=set())
    agent = Agent(config, layout, FileStates("n1", cluster), None, RecordingEvictor("n1", None))
    agent.tick(1000.0)
    assert (pod_dir / "cpu.weight").read_text() == str(1 + (1024 - 2) * 9999 // 262142)
    plan = agent.isolation.plan_cached(agent.context(1001.0), (agent.generation, agent.capacity[1], None))
    (pod_dir / "cpu.weight").write_text("7")  # drift
    agent.tick(1001.0)
    agent.tick(1010.0)
    assert (pod_dir / "cpu.weight").read_text() == "7", "no plan change, no reconcile yet: not read again"
    assert plan[0] is agent.isolation._writes
    agent.tick(1031.0)
    assert (pod_dir / "cpu.weight").read_text() != "7", "the reconcile repairs drift"


@pytest.mark.parametrize(
    ("labels", "spec"),
    [
        # an unknown priority-class label counts as given (upstream reads it by name only): class from QoS
        ({"koordinator.sh/priority-class": "koord-bogus"}, {"priority": 9500, "containers": [{"name": "c"}]}),
        # an init container with requests makes the pod Burstable, as the kubelet computes it
        (
            {},
            {
                "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "1"}}}],
                "containers": [{"name": "c"}],
            },
        ),
        ({"koordinator.sh/qosClass": "BE"}, {"priority": 5500, "containers": [{"name": "c"}]}),
    ],
    ids=["bad-priority-label", "init-container", "be-batch"],
)
def test_agent_classifies_pods_as_the_scheduler_does(labels: dict[str, str], spec: dict[str, Any]) -> None:
    from agent.states.pods import pod_meta
    from app.cache.podinfo import parse_pod

    obj = {"metadata": {"name": "p", "namespace": "d", "uid": "u1", "labels": labels}, "spec": spec}
    mine, theirs = pod_meta(obj, None), parse_pod(obj)
    assert (mine.kube_qos, mine.qos, mine.priority_class) == (theirs.kube_qos, theirs.qos, theirs.priority_class)


def test_api_writer_retries_one_conflict_and_reports_refusals_and_silence() -> None:
    """RetryOnConflict once; a persistent conflict, another refusal or no answer is a ReportError."""
    from agent.reporter import ReportError
    from tests.client.fake_apiserver import FakeAPIServer, status

    base = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
    fake = FakeAPIServer()
    fake.seed(base, {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": "n1"}})
    cfg = kubernetes.client.Configuration()
    cfg.host = fake.url
    conflict = (409, status(409, "Conflict", 'Operation cannot be fulfilled on nodemetrics "n1"'), {})
    report = {"updateTime": "2026-01-01T00:00:00Z", "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1"}}}}
    try:
        with Client(cfg) as client:
            writer = APIMetricWriter(client)
            fake.fail_once[("PUT", f"{base}/n1/status")] = conflict
            writer.write("n1", CollectPolicy().spec(), report)
            assert [(r.method, r.path) for r in fake.requests] == [
                ("GET", f"{base}/n1"),
                ("PUT", f"{base}/n1/status"),
            ] * 2
            assert fake.store[base]["n1"]["status"] == report
            fake.fail[("PUT", f"{base}/n1/status")] = conflict
            with pytest.raises(ReportError, match="conflict persisted"):
                writer.write("n1", CollectPolicy().spec(), report)
            fake.fail[("PUT", f"{base}/n1/status")] = (403, status(403, "Forbidden", "nodemetrics is forbidden"), {})
            with pytest.raises(ReportError, match="HTTP 403: nodemetrics is forbidden"):
                writer.write("n1", CollectPolicy().spec(), report)
        fake.close()
        with Client(cfg) as client, pytest.raises(ReportError, match="ConnectError"):
            APIMetricWriter(client).write("n1", CollectPolicy().spec(), report)
    finally:
        fake.close()


@pytest.mark.parametrize("name", ["pods.yaml", "pods.json"])
def test_file_states_keep_the_nodes_pods_when_their_file_is_caught_empty(tmp_path: Path, name: str) -> None:
    """A writer truncating the pods file before writing must not make the node's pods vanish (the agent would
    plan and write cgroups for an empty node); a deliberate empty List does drop them."""
    from agent.states.providers import FileStates

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d"}, "spec": {"nodeName": "n1"}}
    path = tmp_path / name
    path.write_text(json.dumps({"kind": "List", "items": [pod]}))
    states = FileStates("n1", tmp_path)
    assert states.refresh() and [p["metadata"]["name"] for p in states.pods] == ["p"]
    path.write_text("")
    assert states.refresh()
    assert [p["metadata"]["name"] for p in states.pods] == ["p"]
    assert states.files.empty_reads == 1
    path.write_text(json.dumps({"kind": "List", "items": []}))
    assert states.refresh() and states.pods == []


def test_a_missing_kubepods_cgroup_is_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from agent.cgroups import CgroupLayout
    from agent.cli import warn_missing_kubepods

    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")  # a v2 root
    with caplog.at_level("WARNING", logger="agent"):
        assert warn_missing_kubepods(CgroupLayout.detect(tmp_path, "kubepods.slice")) is True
    assert "kubepods cgroup" in caplog.text and "does not exist" in caplog.text and "--kubepods" in caplog.text
    (tmp_path / "kubepods.slice").mkdir()
    caplog.clear()
    assert warn_missing_kubepods(CgroupLayout.detect(tmp_path, "kubepods.slice")) is False
    assert caplog.text == ""
