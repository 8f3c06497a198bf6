"""/metrics over real HTTP: process and Python series, no ``_created`` series, inspection kept apart from
the extender verbs."""

from __future__ import annotations

from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import LiveServer, filter_body, wire


def families(server: LiveServer) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    text = server.client.get("/metrics").text
    return {f.name: [(s.name, s.labels, s.value) for s in f.samples] for f in text_string_to_metric_families(text)}


def test_process_python_and_no_created(example_server: LiveServer) -> None:
    text = example_server.client.get("/metrics").text
    assert "process_cpu_seconds_total" in text and "process_resident_memory_bytes" in text
    assert "python_info" in text and "python_gc_collections_total" in text
    assert "_created" not in text


def test_explain_is_not_an_extender_verb(example_server: LiveServer) -> None:
    pod = wire("filter.json")["Pod"]
    assert example_server.client.post("/apis/v1/explain", json=filter_body(pod, ["node-idle"])).status_code == 200
    assert example_server.client.post("/filter", json=filter_body(pod, ["node-idle"])).status_code == 200
    fams = families(example_server)
    verbs = {labels["verb"] for _, labels, _ in fams["koord_extender_requests"]}
    assert "filter" in verbs and "explain" not in verbs
    inspections = [(labels, v) for name, labels, v in fams["koord_inspection_requests"] if name.endswith("_total")]
    assert inspections == [({"call": "explain", "code": "200"}, 1.0)]


def test_filter_rejections_by_plugin(example_server: LiveServer) -> None:
    """node-hot is over LoadAware's threshold: each /filter counts one rejection for that plugin."""
    pod = wire("filter.json")["Pod"]
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2", "memory": "4Gi"}}
    for _ in range(2):
        assert (
            example_server.client.post("/filter", json=filter_body(pod, ["node-hot", "node-idle"])).status_code == 200
        )
    samples = {
        (labels["plugin"], labels["status"]): v
        for name, labels, v in families(example_server)["koord_filter_rejections"]
        if name.endswith("_total")
    }
    assert samples[("LoadAwareScheduling", "Unschedulable")] == 2.0


def test_quota_min_max_runtime_used(tmp_path: Path) -> None:
    from app.sources.files import FileSource
    from tests.plugins.elasticquota.fixtures import node, pod, quota

    objs = [
        node("n1", "10"),
        quota("team-a", {"cpu": "4"}, {"cpu": "8", "memory": "64Gi"}),
        pod("a1", "3", namespace="team-a", quota_name="team-a", node="n1"),
    ]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump_all(objs))
    with LiveServer(FileSource(tmp_path, poll_interval=0)) as srv:
        fams = families(srv)
    values = {
        (name, labels["quota"], labels["resource"]): v
        for fam in ("koord_elasticquota_min", "koord_elasticquota_max", "koord_elasticquota_used")
        for name, labels, v in fams[fam]
    }
    assert values[("koord_elasticquota_min", "team-a", "cpu")] == 4.0
    assert values[("koord_elasticquota_max", "team-a", "memory")] == 64 * 2**30
    assert values[("koord_elasticquota_used", "team-a", "cpu")] == 3.0  # cores, not milli
    assert any(labels["quota"] == "team-a" for _, labels, _ in fams["koord_elasticquota_runtime"])


def test_node_usage_against_the_threshold(example_server: LiveServer) -> None:
    """The example's node-hot reports more cpu than LoadAware's 65 % threshold; node-idle less."""
    fams = families(example_server)
    usage = {(labels["node"], labels["resource"]): v for _, labels, v in fams["koord_loadaware_node_usage_percent"]}
    threshold = {labels["resource"]: v for _, labels, v in fams["koord_loadaware_usage_threshold_percent"]}
    assert threshold["cpu"] == 65.0
    assert usage[("node-hot", "cpu")] > threshold["cpu"] > usage[("node-idle", "cpu")]
