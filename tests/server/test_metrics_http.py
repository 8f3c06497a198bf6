"""/metrics over real HTTP: process and Python series, no ``_created`` series, inspection kept apart from
the extender verbs."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import LiveServer, filter_body, wire


def families(server: LiveServer) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    text = server.client.get("/metrics").text
    return {
        f.name: [(s.name, s.labels, s.value) for s in f.samples] for f in text_string_to_metric_families(text)
    }


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
