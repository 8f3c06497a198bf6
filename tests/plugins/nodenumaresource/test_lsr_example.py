"""examples/lsr/lsr.yaml through the embedded service, as `koord scheduler --cluster examples` serves it:
the LSR pod is placed on the node with a NodeResourceTopology and gets whole cores of one NUMA node."""

from __future__ import annotations

import asyncio
import json

import httpx
import yaml

from app.sources.files import FileSource
from tests.conftest import ROOT, LiveServer
from tests.plugins.gangkit import filter_verdict

EXAMPLES = ROOT / "examples"


def test_the_lsr_example_gets_a_cpuset() -> None:
    docs = list(yaml.safe_load_all((EXAMPLES / "lsr" / "lsr.yaml").read_text()))
    lsr = next(d for d in docs if d["kind"] == "Pod")
    source = FileSource(EXAMPLES, poll_interval=0, restamp_interval=0)
    with LiveServer(source) as srv:
        names = sorted(srv.service.cache.nodes)
        assert "node-lsr" in names and len(names) > 1
        verdict = filter_verdict(srv.client, lsr, names)
        # only the node reporting its cpu topology can give the required cpuset
        assert verdict["NodeNames"] == ["node-lsr"]
        unresolvable = verdict["FailedAndUnresolvableNodes"]
        assert unresolvable and set(unresolvable.values()) == {"node(s) invalid CPU Topology"}, verdict

        async def run() -> str:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                body = {"PodName": "lsr-web", "PodNamespace": "default", "PodUID": "", "Node": "node-lsr"}
                r = await client.post("/bind", json=body)
                assert r.status_code == 200, r.text
                error: str = r.json()["Error"]
                return error

        assert asyncio.run(run()) == ""
        obj = source._objects["Pod"]["default/lsr-web"]
        status = json.loads(obj["metadata"]["annotations"]["scheduling.koordinator.sh/resource-status"])
        assert status == {"cpuset": "0-1,16-17"}
        node = srv.client.get("/apis/v1/nodes/node-lsr").json()
        assert node["cpuAllocation"]["numaNodes"][0]["allocated"] == "0-1,16-17"
        explained = srv.client.post("/apis/v1/explain", json={"Pod": lsr, "Nodes": None, "NodeNames": ["node-lsr"]})
        assert explained.status_code == 200
        assert explained.json()["nodes"]["node-lsr"]["details"]["NodeNUMAResource"]["numaNodes"][1]["freeCount"] == 16


def test_koord_explain_shows_free_cpus_per_numa_node() -> None:
    from rich.console import Console

    from app.cli.explain import render_explain

    cpus = {
        "numaNodes": [
            {"node": 0, "free": "2-7,18-23", "freeCount": 12, "allocated": "0-1,16-17"},
            {"node": 1, "free": "8-15,24-31", "freeCount": 16, "allocated": ""},
        ]
    }
    answer = {
        "pod": "default/lsr-web",
        "nodes": {
            "node-lsr": {
                "feasible": True,
                "filter": {},
                "scores": {},
                "total": 0,
                "details": {"NodeNUMAResource": cpus},
            }
        },
    }
    console = Console(width=200, record=True)
    console.print(render_explain(answer))
    text = " ".join(console.export_text().split())  # the caption wraps at the table width
    assert (
        "node-lsr cpus: NUMA 0 free 2-7,18-23 (12), allocated 0-1,16-17; NUMA 1 free 8-15,24-31 (16), allocated -"
        in text
    )


def test_the_whole_examples_folder_loads_as_cluster_files() -> None:
    """`koord scheduler --cluster examples` (README, docs) reads every YAML under examples/ strictly at
    start and exits 2 on a file that is not a cluster file: nothing else (sim configs, workloads) may live
    there. The what-if inputs are in examples-whatif/ for that reason."""
    FileSource(EXAMPLES, poll_interval=0, restamp_interval=0).preload()  # raises ManifestError on a bad file
