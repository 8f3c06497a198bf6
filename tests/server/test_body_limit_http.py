"""The request body limit over real HTTP: a body over ``max_request_body_bytes`` gets 413 with a JSON message
naming the limit, whether announced by Content-Length or streamed chunked; the service keeps serving; the
default limit holds a 5,000-node NodeList of production-sized nodes; the CLI flag refuses nonsense."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.server.app import DEFAULT_MAX_REQUEST_BODY_BYTES
from app.sources.files import FileSource
from tests.conftest import EXAMPLE_CLUSTER, LiveServer, filter_body, wire

LIMIT = 64 * 1024


@pytest.fixture
def small_limit_server(tmp_path: Path) -> Iterator[LiveServer]:
    cluster = tmp_path / "cluster"
    shutil.copytree(EXAMPLE_CLUSTER, cluster)
    with LiveServer(FileSource(cluster, poll_interval=0.1), max_request_body_bytes=LIMIT) as srv:
        yield srv


def _padded_filter_body(size: int) -> bytes:
    """A valid /filter body of exactly ``size`` bytes (padding in an annotation)."""
    pod = copy.deepcopy(wire("filter.json")["Pod"])
    pod["metadata"].setdefault("annotations", {})["pad"] = ""
    unpadded = len(orjson.dumps(filter_body(pod, ["node-idle"])))
    pod["metadata"]["annotations"]["pad"] = "x" * (size - unpadded)
    body = orjson.dumps(filter_body(pod, ["node-idle"]))
    assert len(body) == size
    return body


@pytest.mark.parametrize("path", ["/filter", "/prioritize", "/bind", "/mutate-pod", "/apis/v1/explain"])
def test_a_body_over_the_limit_is_413_naming_the_limit(small_limit_server: LiveServer, path: str) -> None:
    r = small_limit_server.client.post(
        path, content=_padded_filter_body(LIMIT + 10), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 413, r.text
    assert r.json() == {"message": f"request body exceeds the limit of {LIMIT} bytes (--max-request-body-bytes)"}


def test_a_streamed_body_without_content_length_is_cut_at_the_limit(small_limit_server: LiveServer) -> None:
    body = _padded_filter_body(LIMIT * 3)

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(body), 8192):
            yield body[i : i + 8192]

    r = small_limit_server.client.post("/filter", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413, r.text
    assert "limit of 65536 bytes" in r.json()["message"]


def test_bodies_under_the_limit_are_served_and_the_service_keeps_serving(small_limit_server: LiveServer) -> None:
    c = small_limit_server.client
    headers = {"Content-Type": "application/json"}
    assert c.post("/filter", content=_padded_filter_body(LIMIT + 1), headers=headers).status_code == 413
    r = c.post("/filter", content=_padded_filter_body(LIMIT - 1000), headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["NodeNames"] == ["node-idle"]


def test_the_default_holds_a_5000_node_nodelist_of_production_sized_nodes() -> None:
    node = copy.deepcopy(wire("filter.nodecache-false.json")["Nodes"]["items"][0])
    # a production node caches ~50 images with digests and several tags each
    node["status"]["images"] = [
        {
            "names": [
                f"registry.example.com/team/app-{i}@sha256:{'a' * 64}",
                f"registry.example.com/team/app-{i}:v{i}",
            ],
            "sizeBytes": 123456789,
        }
        for i in range(50)
    ]
    pod = wire("filter.json")["Pod"]
    body = orjson.dumps({"Pod": pod, "Nodes": {"metadata": {}, "items": [node] * 5000}, "NodeNames": None})
    assert len(body) * 2 < DEFAULT_MAX_REQUEST_BODY_BYTES, len(body)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("lots", "invalid quantity"),
        ("0", "not a positive whole number of bytes"),
        ("-1Mi", "not a positive whole number of bytes"),
        ("0.5", "not a positive whole number of bytes"),
        ("1e999999999", "not a positive whole number of bytes"),
    ],
)
def test_the_flag_refuses_what_is_not_a_byte_count(value: str, message: str) -> None:
    result = CliRunner().invoke(cli, ["scheduler", "--max-request-body-bytes", value])
    assert result.exit_code == 2, result.output
    output = " ".join(result.output.split())  # rich wraps long lines
    assert "--max-request-body-bytes" in output and message in output
