"""The /ui page over real HTTP: the page and its static files with their content types, and the JSON
endpoints its script reads, on the embedded example cluster (node-hot is over LoadAware's cpu threshold)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import yaml

from app.sources.files import FileSource
from tests.conftest import EXAMPLE_CLUSTER, LiveServer


def test_page_and_static_files_are_served(example_server: LiveServer) -> None:
    c = example_server.client
    page = c.get("/ui")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assets = re.findall(r'(?:src|href)="(/ui/static/[^"]+)"', page.text)
    assert sorted(assets) == ["/ui/static/ui.css", "/ui/static/ui.js"]
    assert "http" not in "".join(re.findall(r'(?:src|href)="([^"]+)"', page.text))  # nothing from a CDN
    js, css = c.get("/ui/static/ui.js"), c.get("/ui/static/ui.css")
    assert js.status_code == css.status_code == 200
    assert js.headers["content-type"].startswith("text/javascript")
    assert css.headers["content-type"].startswith("text/css")
    assert "https://" not in js.text and "https://" not in css.text
    assert c.get("/ui/static/index.html").status_code == 404  # only the listed files
    assert c.get("/ui/static/..%2Fapp.py").status_code == 404


def test_docs_need_no_cdn(example_server: LiveServer) -> None:
    """FastAPI's /docs and /redoc load a CDN's scripts: they are off; /openapi.json (plain JSON) stays."""
    c = example_server.client
    assert c.get("/docs").status_code == 404
    assert c.get("/redoc").status_code == 404
    assert "/apis/v1/overview" in c.get("/openapi.json").json()["paths"]


def test_overview_nodes_against_thresholds_and_pending_pods(example_server: LiveServer) -> None:
    body = example_server.client.get("/apis/v1/overview").json()
    nodes = {n["name"]: n for n in body["nodes"]}
    assert sorted(nodes) == ["node-busy", "node-hot", "node-idle", "node-nokoordlet"]
    hot = nodes["node-hot"]
    assert hot["usagePercent"]["cpu"] == 80.0  # 12800m of 16
    assert hot["usageThresholds"] == {"cpu": 65, "memory": 95}  # LoadAware's defaults
    assert hot["usage"] == {"cpu": "12800m", "memory": "30Gi"}
    assert hot["pods"] == 2  # cache-1 and web-2
    assert nodes["node-nokoordlet"]["usagePercent"] is None  # no NodeMetric
    pending = body["pendingPods"]
    assert [(p["namespace"], p["name"]) for p in pending] == [("batch", "batch-job-1")]
    assert pending[0]["pod"]["metadata"]["name"] == "batch-job-1"


def test_overview_takes_a_node_s_own_thresholds(tmp_path: Path) -> None:
    """A node annotated scheduling.koordinator.sh/usage-thresholds is drawn against its own thresholds (the
    annotation's usage part replaces the args' whole: memory is no longer checked there)."""
    cluster = tmp_path / "cluster"
    shutil.copytree(EXAMPLE_CLUSTER, cluster)
    nodes = yaml.safe_load((cluster / "nodes.yaml").read_text())
    idle = next(n for n in nodes["items"] if n["metadata"]["name"] == "node-idle")
    idle["metadata"]["annotations"] = {"scheduling.koordinator.sh/usage-thresholds": '{"usageThresholds": {"cpu": 5}}'}
    (cluster / "nodes.yaml").write_text(yaml.safe_dump(nodes))
    with LiveServer(FileSource(cluster, poll_interval=0)) as srv:
        body = srv.client.get("/apis/v1/overview").json()
    by_name = {n["name"]: n for n in body["nodes"]}
    assert by_name["node-idle"]["usageThresholds"] == {"cpu": 5}
    assert by_name["node-busy"]["usageThresholds"] == {"cpu": 65, "memory": 95}


def test_endpoints_the_page_reads(example_server: LiveServer) -> None:
    c = example_server.client
    tree = c.get("/apis/v1/plugins/ElasticQuota/tree").json()
    assert tree["root"]["name"] == "koordinator-root-quota"
    assert {q["name"] for q in tree["root"]["children"]} == {"koordinator-default-quota", "koordinator-system-quota"}
    assert c.get("/apis/v1/plugins/DeviceShare/nodeDeviceSummaries").json() == {}  # the example has no GPU
    pod = c.get("/apis/v1/overview").json()["pendingPods"][0]["pod"]
    answer = c.post("/apis/v1/explain", json={"Pod": pod, "Nodes": None, "NodeNames": None}).json()
    assert answer["pod"] == "batch/batch-job-1"
    assert answer["nodes"]["node-hot"]["feasible"] is False
    hot = answer["nodes"]["node-hot"]["filter"]["LoadAwareScheduling"]
    assert hot["reason"] == "node(s) cpu usage exceed threshold"


def test_page_files_ship_in_the_wheel() -> None:
    """Every file of app/server/static matches pyproject's package-data for app.server (else an installed
    service would answer /ui with a missing file)."""
    import fnmatch
    import tomllib

    from app.server.ui_routes import STATIC_DIR, STATIC_FILES
    from tests.conftest import ROOT

    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["app.server"]
    files = sorted(p.name for p in STATIC_DIR.iterdir())
    assert files == sorted(["index.html", *STATIC_FILES])
    for name in files:
        assert any(fnmatch.fnmatch(f"static/{name}", g) for g in globs), name
