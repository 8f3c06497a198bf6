"""NodeSLO derivation, and the controllers end to end: embedded (file source, over HTTP) and
against an HTTP fake of the API server (what is written: NodeSLO objects, node status merge patches)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import yaml

from app.manager import run_embedded_controllers
from app.manager.controllers import SLOControllers
from app.manager.sloconfig import SLOConfig, node_slo_spec, parse_slo_config
from app.server.app import create_app
from app.sources.files import FileSource
from app.sources.kubernetes import KubernetesSource
from tests.conftest import EXAMPLE_CLUSTER, free_port

DEFAULT_SPEC = {
    "resourceUsedThresholdWithBE": {
        "enable": False,
        "cpuSuppressThresholdPercent": 65,
        "cpuSuppressPolicy": "cpuset",
        "memoryEvictThresholdPercent": 70,
        "cpuEvictPolicy": "evictByRealLimit",
    },
    "resourceQOSStrategy": {},
    "cpuBurstStrategy": {
        "policy": "none",
        "cpuBurstPercent": 1000,
        "cfsQuotaBurstPercent": 300,
        "cfsQuotaBurstPeriodSeconds": -1,
        "sharePoolThresholdPercent": 50,
    },
    "systemStrategy": {"totalNetworkBandwidth": "0"},
}


def test_nodeslo_defaults_and_merge() -> None:
    cfg, errors = parse_slo_config({}, SLOConfig())
    assert errors == []
    assert node_slo_spec(cfg, {}, {}) == DEFAULT_SPEC
    data = {
        "resource-threshold-config": json.dumps(
            {
                "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60},
                "nodeStrategies": [
                    {
                        "name": "gpu",
                        "nodeSelector": {"matchLabels": {"pool": "gpu"}},
                        "cpuSuppressThresholdPercent": 50,
                    },
                    {"name": "none", "cpuSuppressThresholdPercent": 10},  # nil selector matches no node
                ],
            }
        ),
        "system-config": json.dumps({"clusterStrategy": {"minFreeKbytesFactor": 100}}),
        "host-application-config": json.dumps({"applications": [{"name": "nginx", "priority": "koord-prod"}]}),
    }
    cfg, errors = parse_slo_config(data, SLOConfig())
    assert errors == []
    plain = node_slo_spec(cfg, {}, {})
    assert plain["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 60
    assert plain["resourceUsedThresholdWithBE"]["memoryEvictThresholdPercent"] == 70  # default kept
    assert plain["systemStrategy"] == {"totalNetworkBandwidth": "0", "minFreeKbytesFactor": 100}
    assert plain["hostApplications"] == [{"name": "nginx", "priority": "koord-prod"}]
    gpu = node_slo_spec(cfg, {"pool": "gpu"}, {"node.koordinator.sh/network-bandwidth": "10G"})
    assert gpu["resourceUsedThresholdWithBE"] == {
        **plain["resourceUsedThresholdWithBE"],
        "cpuSuppressThresholdPercent": 50,
    }
    assert gpu["systemStrategy"]["totalNetworkBandwidth"] == "10G"


def test_malformed_key_keeps_its_last_good_value() -> None:
    good, _ = parse_slo_config({"cpu-burst-config": '{"clusterStrategy": {"policy": "auto"}}'}, SLOConfig())
    bad, errors = parse_slo_config(
        {"cpu-burst-config": '{"clusterStrategy": {"cpuBurstPercent": "lots"}}', "system-config": "{"}, good
    )
    assert errors[0].startswith("cpu-burst-config.clusterStrategy.cpuBurstPercent: Input should be a valid integer")
    assert errors[1].startswith("system-config: not valid JSON")
    assert node_slo_spec(bad, {}, {})["cpuBurstStrategy"]["policy"] == "auto"


# ------------------------------------------------------------------ embedded mode over HTTP


class Served:
    def __init__(self, cluster: Path) -> None:
        self.source = FileSource(cluster, poll_interval=0.1)
        self.app = create_app(self.source, background=[run_embedded_controllers])
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=10)

    def wait(self, fn: Any, timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = fn()
                if value:
                    return value
            except (httpx.TransportError, KeyError):
                pass
            time.sleep(0.05)
        raise AssertionError("condition not met in time")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    for f in EXAMPLE_CLUSTER.iterdir():
        (cluster / f.name).write_text(f.read_text())
    srv = Served(cluster)
    srv.thread.start()
    srv.wait(lambda: srv.client.get("/readyz").status_code == 200)
    yield srv
    srv.client.close()
    srv.server.should_exit = True
    srv.thread.join(timeout=10)


def test_embedded_batch_resources_and_nodeslo_appear(served: Served, tmp_path: Path) -> None:
    c = served.client

    def batch(name: str) -> dict[str, str] | None:
        alloc: dict[str, str] = c.get(f"/apis/v1/nodes/{name}").json()["allocatable"]
        return alloc if "kubernetes.io/batch-cpu" in alloc else None

    idle = served.wait(lambda: batch("node-idle"))
    # 16 cores - 40 % margin (6400m) - system 400m - web-1 usage 900m; memory likewise in bytes.
    assert idle["kubernetes.io/batch-cpu"] == "8300"
    assert idle["kubernetes.io/batch-memory"] == str(64 * 2**30 - int(64 * 2**30 * 0.35) - 2 * 2**30 - 4 * 2**30)
    assert "kubernetes.io/batch-cpu" not in c.get("/apis/v1/nodes/node-nokoordlet").json()["allocatable"]
    slo = served.wait(
        lambda: (
            c.get("/apis/v1/nodeslos/node-idle").json()
            if c.get("/apis/v1/nodeslos/node-idle").status_code == 200
            else None
        )
    )
    assert slo["spec"]["resourceUsedThresholdWithBE"]["enable"] is True
    assert slo["spec"]["cpuBurstStrategy"]["policy"] == "auto"
    # Batch resources feed scheduling: NodeResourcesFit sees the new allocatable.
    assert served.app.state.service.cache.nodes["node-idle"].allocatable["kubernetes.io/batch-cpu"] == 8300

    # Invalid content keeps the last good config and says why (metric); disabling resets nodes.
    cm_file = tmp_path / "cluster" / "slo-controller-config.yaml"
    cm = yaml.safe_load(cm_file.read_text())
    cm["data"]["colocation-config"] = '{"enable": true, "cpuReclaimThresholdPercent": "lots"}'
    cm_file.write_text(yaml.safe_dump(cm))
    served.wait(lambda: 'koord_slo_controller_config_invalid{key="colocation-config"} 1.0' in c.get("/metrics").text)
    assert batch("node-idle") is not None
    cm["data"]["colocation-config"] = '{"enable": false}'
    cm_file.write_text(yaml.safe_dump(cm))
    served.wait(lambda: batch("node-idle") is None)
    assert 'koord_slo_controller_config_invalid{key="colocation-config"} 0.0' in c.get("/metrics").text


# ------------------------------------------------------------------ against a fake API server


class FakeAPI:
    """Serves LIST for the watched kinds (empty watches), records writes."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.objects = objects
        self.writes: list[tuple[str, str, str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: Any, ctype: str = "application/json") -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                if "watch=true" in query:
                    time.sleep(0.2)
                    self._send(200, "")
                    return
                self._send(200, {"metadata": {"resourceVersion": "1"}, "items": fake.objects.get(path, [])})

            def _body(self) -> Any:
                return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")

            def do_POST(self) -> None:
                body = self._body()
                fake.writes.append(("POST", self.path, self.headers.get("Content-Type", ""), body))
                self._send(201, body)

            def do_PATCH(self) -> None:
                body = self._body()
                fake.writes.append(("PATCH", self.path, self.headers.get("Content-Type", ""), body))
                self._send(200, {})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


async def test_controllers_write_through_the_api_server(tmp_path: Path) -> None:
    docs = {p.name: list(yaml.safe_load_all(p.read_text())) for p in EXAMPLE_CLUSTER.iterdir()}
    nodes = [n for n in docs["nodes.yaml"][0]["items"] if n["metadata"]["name"] in ("node-idle", "node-nokoordlet")]
    nodes = [{**n, "status": {**n["status"], "allocatable": {"cpu": "16", "memory": "64Gi"}}} for n in nodes]
    metric = next(m for m in docs["nodemetrics.yaml"] if m["metadata"]["name"] == "node-idle")
    metric["status"]["updateTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    pods = [p for p in docs["pods.yaml"] if p["spec"].get("nodeName") == "node-idle"]
    cm = docs["slo-controller-config.yaml"][0]
    fake = FakeAPI(
        {
            "/api/v1/nodes": nodes,
            "/api/v1/pods": pods,
            "/apis/slo.koordinator.sh/v1alpha1/nodemetrics": [metric],
            "/api/v1/namespaces/koordinator-system/configmaps": [cm],
        }
    )
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{fake.port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    kinds = ("Node", "Pod", "NodeMetric", "NodeSLO", "ConfigMap")
    source = KubernetesSource(kinds, kubeconfig=str(kubeconfig), backoff_initial=0.2)
    from app.cache.snapshot import ClusterCache

    cache = ClusterCache()
    controllers = SLOControllers(cache, source)
    await source.start(cache)
    task = asyncio.create_task(controllers.run())
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(fake.writes) < 3:
            await asyncio.sleep(0.05)
    finally:
        task.cancel()
        await source.stop()
        fake.httpd.shutdown()  # no server thread outlives the test
        fake.httpd.server_close()
    slos = [w for w in fake.writes if w[0] == "POST"]
    assert {w[1] for w in slos} == {"/apis/slo.koordinator.sh/v1alpha1/nodeslos"}
    assert sorted(w[3]["metadata"]["name"] for w in slos) == ["node-idle", "node-nokoordlet"]
    assert slos[0][3]["kind"] == "NodeSLO" and slos[0][3]["spec"]["cpuBurstStrategy"]["policy"] == "auto"
    patches = [w for w in fake.writes if w[0] == "PATCH"]
    assert len(patches) == 1  # node-nokoordlet has no NodeMetric and nothing to remove
    _, path, ctype, body = patches[0]
    assert path == "/api/v1/nodes/node-idle/status"
    assert ctype == "application/merge-patch+json"
    assert body["status"]["allocatable"]["kubernetes.io/batch-cpu"] == "8300"
    assert body["status"]["capacity"] == body["status"]["allocatable"]
