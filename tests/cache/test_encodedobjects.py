"""Raw Pods, Nodes and NodeMetrics are kept as packed (Zstandard-compressed) JSON bytes: small, read back as
fresh copies, and an object JSON cannot carry is refused alone (log line, metric) while the rest keeps flowing."""

from __future__ import annotations

import datetime as dt
import sys
from typing import Any

import pytest
import yaml

from app.api.jsonbytes import decode_object, decode_stored, encode_object, pack_object, unpack_object
from app.cache.encodedobjects import YOUNG_BYTES, EncodedObjects, UnencodableObject
from app.cache.snapshot import ClusterCache
from app.sources.events import Event, EventType


def pod(name: str, node: str = "n1", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", **extra},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Running"},
    }


def node(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, **extra},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def test_encoded_bytes_are_exact_size() -> None:
    data = encode_object({"a": "x" * 600})
    # orjson's own bytes keep a 4 KB buffer; the stored copy is its length plus the bytes header
    assert sys.getsizeof(data) < len(data) + 64


def test_packed_objects_are_smaller_than_their_json_and_exact_size() -> None:
    obj = pod("web-1", labels={"app": "web", "pod-template-hash": "7d9f8c6b5"}, annotations={"a": "x" * 300})
    packed = pack_object(obj)
    assert len(packed) < len(encode_object(obj)) * 0.7
    # the compressor's result keeps a worst-case buffer; the stored copy is its length plus the bytes header
    assert sys.getsizeof(packed) < len(packed) + 64
    assert unpack_object(packed) == obj


def test_unpacking_what_is_not_a_packed_object_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a packed object"):
        unpack_object(b'{"plain": "json"}')
    with pytest.raises(TypeError, match="not JSON-shaped"):
        pack_object({"s": {1, 2}})


def test_node_raw_is_packed_and_reads_back() -> None:
    cache = ClusterCache()
    cache.apply(Event("Node", EventType.ADDED, node("n1", labels={"zone": "a"})))
    state = cache.nodes["n1"]
    assert unpack_object(state.raw) == state.obj == node("n1", labels={"zone": "a"})


def test_reads_are_fresh_copies() -> None:
    store = EncodedObjects()
    store["k"] = {"metadata": {"labels": {"a": "1"}}}
    got = store["k"]
    got["metadata"]["labels"]["a"] = "changed"
    assert store["k"] == {"metadata": {"labels": {"a": "1"}}}
    assert store.get("missing") is None and "k" in store and len(store) == 1 and list(store) == ["k"]
    del store["k"]
    with pytest.raises(KeyError):
        store["k"]


def test_yaml_timestamps_read_back_as_rfc3339_strings() -> None:
    loaded = yaml.safe_load("creationTimestamp: 2024-05-01T10:00:00Z\nnaive: 2024-05-01 10:00:00\n")
    assert isinstance(loaded["creationTimestamp"], dt.datetime)
    assert decode_object(encode_object(loaded)) == {
        "creationTimestamp": "2024-05-01T10:00:00Z",
        "naive": "2024-05-01T10:00:00Z",
    }


def test_a_value_json_cannot_carry_is_refused_with_its_key() -> None:
    store = EncodedObjects()
    with pytest.raises(UnencodableObject, match="default/p"):
        store["default/p"] = {"spec": {"tags": {"a", "b"}}}
    assert "default/p" not in store


def test_an_unencodable_pod_or_node_is_refused_alone() -> None:
    cache = ClusterCache()
    cache.replace("Node", [node("n1"), node("bad", odd=yaml.safe_load("!!set {a: null}"))])
    assert sorted(cache.nodes) == ["n1"]
    cache.replace("Pod", [pod("good"), pod("bad", odd={b"raw"})])
    assert sorted(p.name for p in cache.pods.values()) == ["good"]
    assert cache.rejected_by_kind == {"Node": 1, "Pod": 1}
    assert cache.nodes["n1"].requested == {"cpu": 1000}  # nothing of the bad pod was accounted
    cache.apply(Event("Pod", EventType.MODIFIED, pod("good", labels={"v": "2"})))
    assert cache.pod_objects["uid-good"]["metadata"]["labels"] == {"v": "2"}


def test_the_cache_hands_out_copies_of_pods_nodes_and_node_metrics() -> None:
    cache = ClusterCache()
    cache.apply(Event("Node", EventType.ADDED, node("n1")))
    cache.apply(Event("Pod", EventType.ADDED, pod("p")))
    metric = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": "n1"}}
    cache.apply(Event("NodeMetric", EventType.ADDED, metric))
    for read in (
        lambda: cache.pod_objects["uid-p"],
        lambda: cache.nodes["n1"].obj,
        lambda: cache.objects["NodeMetric"]["n1"],
    ):
        first = read()
        first["metadata"]["name"] = "edited"
        assert read()["metadata"]["name"] != "edited"
    assert isinstance(cache.objects["NodeMetric"], EncodedObjects)
    cache.apply(Event("NodeMetric", EventType.DELETED, metric))
    assert "n1" not in cache.objects["NodeMetric"]


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def test_stored_bytes_read_back_packed_or_plain_and_anything_else_is_a_value_error() -> None:
    obj = pod("p", annotations={"a": "x" * 300})
    assert decode_stored(pack_object(obj)) == obj == decode_stored(encode_object(obj))
    with pytest.raises(ValueError, match="not a packed object"):
        decode_stored(ZSTD_MAGIC + b"garbage")
    with pytest.raises(ValueError):
        decode_stored(b"not json")


def test_objects_wait_as_plain_json_and_are_compressed_together_past_the_budget() -> None:
    one = len(encode_object(pod("p0")))
    store = EncodedObjects(young_bytes=3 * one)
    store["p0"] = pod("p0")
    store["p1"] = pod("p1")
    for key in ("p0", "p1"):  # young: plain JSON, read back the same
        assert (store.encoded(key) or b"").startswith(b"{")
        assert store[key] == pod(key)
    store["p2"] = pod("p2")  # the budget is reached: every young object is compressed
    for key in ("p0", "p1", "p2"):
        assert (store.encoded(key) or b"").startswith(ZSTD_MAGIC)
        assert store[key] == pod(key)
    store["p1"] = pod("p1", labels={"v": "2"})  # a new version waits again, the others stay packed
    assert (store.encoded("p1") or b"").startswith(b"{")
    assert (store.encoded("p0") or b"").startswith(ZSTD_MAGIC)
    assert store["p1"]["metadata"]["labels"] == {"v": "2"}


def test_a_version_replaced_while_young_is_never_compressed(monkeypatch: pytest.MonkeyPatch) -> None:
    import app.cache.encodedobjects as encodedobjects

    packed: list[bytes] = []
    real = encodedobjects.pack_encoded
    monkeypatch.setattr(encodedobjects, "pack_encoded", lambda data: packed.append(data) or real(data))
    store = EncodedObjects()
    for version in range(3):  # created, bound, running: one pod's burst of events
        store["p"] = pod("p", labels={"v": str(version)})
    store["gone"] = pod("gone")
    del store["gone"]  # deleted while young: nothing to compress, and no KeyError later
    store.pack_young()
    assert [decode_object(d)["metadata"]["labels"] for d in packed] == [{"v": "2"}]
    assert store["p"]["metadata"]["labels"] == {"v": "2"} and "gone" not in store


def test_a_zero_budget_compresses_every_write_and_the_default_is_bounded() -> None:
    store = EncodedObjects(young_bytes=0)
    store["p"] = pod("p")
    assert (store.encoded("p") or b"").startswith(ZSTD_MAGIC)
    assert store.encoded("missing") is None
    assert 0 < YOUNG_BYTES <= 4 * 1024 * 1024  # plain JSON held at most: a few MB of RSS


# ---------------------------------------------------------------- held versions (a pending pod's, replaced soon)
def _plain(store: EncodedObjects, key: str) -> bool:
    return (store.encoded(key) or b"").startswith(b"{")


def test_held_versions_outlast_the_young_budget_until_their_own_budget() -> None:
    one = len(encode_object(pod("h0")))
    store = EncodedObjects(young_bytes=2 * one, held_bytes=3 * one)
    store.put("h0", pod("h0"), held=True)
    store.put("h1", pod("h1"), held=True)
    store["y0"] = pod("y0")
    store["y1"] = pod("y1")  # the young budget is reached: the young are compressed, the held wait
    assert not _plain(store, "y0") and not _plain(store, "y1")
    assert _plain(store, "h0") and _plain(store, "h1")
    for key in ("h0", "h1", "y0", "y1"):
        assert store[key] == pod(key)
    store.put("h2", pod("h2"), held=True)  # the held budget is reached: every held version is compressed
    for key in ("h0", "h1", "h2"):
        assert not _plain(store, key) and store[key] == pod(key)


def test_a_held_version_replaced_by_a_young_one_leaves_the_held_budget() -> None:
    one = len(encode_object(pod("h0")))
    store = EncodedObjects(young_bytes=100 * one, held_bytes=2 * one + 1)
    store.put("h0", pod("h0"), held=True)
    store["h0"] = pod("h0", labels={"bound": "yes"})  # its binding: young now, no longer counted as held
    store.put("h1", pod("h1"), held=True)
    assert _plain(store, "h1")  # one held version: under the held budget
    store.put("h2", pod("h2"), held=True)
    del store["h2"]  # deleted while held: no longer counted either
    store.put("h3", pod("h3"), held=True)
    assert _plain(store, "h1") and _plain(store, "h3")
    store.put("h4", pod("h4"), held=True)  # three held versions now: past the budget
    assert not _plain(store, "h1") and not _plain(store, "h3") and not _plain(store, "h4")
    assert _plain(store, "h0") and store["h0"]["metadata"]["labels"] == {"bound": "yes"}
    assert "h2" not in store
    store.pack_young()  # compresses every plain object, young and held
    assert not _plain(store, "h0")
    store.put("h5", pod("h5"), held=True)
    store.pack_young()
    assert not _plain(store, "h5") and store["h5"] == pod("h5")


def test_a_pending_pods_version_is_held_and_each_scheduled_pod_compressed_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A burst of new pods larger than the young budget, then each pod's binding and Running update: the
    pending versions wait (held), so every pod is compressed once, in its last version."""
    import app.cache.encodedobjects as encodedobjects

    packed: list[bytes] = []
    real = encodedobjects.pack_encoded
    monkeypatch.setattr(encodedobjects, "pack_encoded", lambda data: packed.append(data) or real(data))
    cache = ClusterCache()
    cache.pod_objects = EncodedObjects(young_bytes=4 * len(encode_object(pod("p00", node=""))))
    cache.apply(Event("Node", EventType.ADDED, node("n1")))
    names = [f"p{i:02d}" for i in range(12)]
    for name in names:  # three times the young budget of pending pods
        cache.apply(Event("Pod", EventType.ADDED, pod(name, node="", labels={"v": "pending"})))
    assert packed == []
    for name in names:
        cache.apply(Event("Pod", EventType.MODIFIED, pod(name, node="n1", labels={"v": "bound"})))
        cache.apply(Event("Pod", EventType.MODIFIED, pod(name, node="n1", labels={"v": "running"})))
    cache.pod_objects.pack_young()
    assert sorted(decode_object(d)["metadata"]["name"] for d in packed) == names
    assert {decode_object(d)["metadata"]["labels"]["v"] for d in packed} == {"running"}
    for name in names:
        assert cache.pod_objects[f"uid-{name}"] == pod(name, node="n1", labels={"v": "running"})
