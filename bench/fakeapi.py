"""A fake kube-apiserver for bench/cycle.py: asyncio over raw HTTP/1.1, run in its own process.

It speaks the wire the service's Kubernetes source uses and emits the watch events a real
kube-apiserver (v1.26) emits for each pod of a scheduling cycle:

* ``GET <collection>`` (cluster-wide or namespaced): a paginated LIST (``limit``/``continue``)
  with ``metadata.resourceVersion``; kinds it does not hold answer an empty list.
* ``GET <collection>?watch=true&resourceVersion=N``: a chunked stream of JSON lines, one
  ``{"type","object"}`` per event after N, held open until ``timeoutSeconds`` or the client leaves.
* ``POST /api/v1/namespaces/{ns}/pods``: create (``ADDED``).
* ``POST .../pods/{name}/binding``: bind with the uid precondition (``MODIFIED`` with
  ``spec.nodeName`` and the PodScheduled condition), then, ``kubelet_delay`` seconds later, the
  kubelet's status update (``MODIFIED``: phase Running, conditions, IPs, containerStatuses).
  409 when already bound or the uid differs.
* ``PATCH`` with ``application/merge-patch+json`` on pods (and their ``/status``): ``MODIFIED``.
* ``GET`` of one pod or node.

Every stored object carries ``managedFields`` as a real API server writes them (one entry per
manager). Bench control endpoints (not Kubernetes): ``POST /bench/create`` ``{"pods": [...]}``
creates many pods in one call (answers ``{"items": [...]}``, the pods as stored),
``POST /bench/touch`` ``{"count": N}`` emits N ``MODIFIED`` events
on running pods (an annotation changes), ``GET /bench/stats`` answers counters.

Mirrors the behaviour of k8s.io/apiserver's registry (pkg/registry/core/pod/storage BindingREST,
the watch cache's event stream); it is a bench fixture, not a conformance fake.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _collection(path: str) -> tuple[str, str | None, str | None, str | None]:
    """(cluster-wide collection path, namespace, name, subresource) of an API path."""
    parts = path.strip("/").split("/")
    base = parts[:2] if parts[0] == "api" else parts[:3]
    rest = parts[len(base) :]
    ns = None
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
        ns, rest = rest[1], rest[2:]
    coll = "/" + "/".join([*base, rest[0]]) if rest else path
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    return coll, ns, name, sub


def scheduler_fields(ts: str) -> dict[str, Any]:
    """The managedFields entry kube-scheduler's Binding leaves (PodScheduled condition)."""
    return {
        "manager": "kube-scheduler",
        "operation": "Update",
        "apiVersion": "v1",
        "time": ts,
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:status": {
                "f:conditions": {
                    ".": {},
                    'k:{"type":"PodScheduled"}': {
                        ".": {},
                        "f:lastProbeTime": {},
                        "f:lastTransitionTime": {},
                        "f:status": {},
                        "f:type": {},
                    },
                }
            }
        },
        "subresource": "status",
    }


def kubelet_fields(ts: str) -> dict[str, Any]:
    """The managedFields entry the kubelet's status update leaves."""
    cond = {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}
    return {
        "manager": "kubelet",
        "operation": "Update",
        "apiVersion": "v1",
        "time": ts,
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:status": {
                "f:conditions": {
                    'k:{"type":"ContainersReady"}': dict(cond),
                    'k:{"type":"Initialized"}': dict(cond),
                    'k:{"type":"Ready"}': dict(cond),
                },
                "f:containerStatuses": {},
                "f:hostIP": {},
                "f:phase": {},
                "f:podIP": {},
                "f:podIPs": {".": {}, 'k:{"ip":"10.244.0.1"}': {".": {}, "f:ip": {}}},
                "f:startTime": {},
            }
        },
        "subresource": "status",
    }


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


@dataclass
class _Watcher:
    writer: asyncio.StreamWriter
    closed: bool = False


@dataclass
class FakeAPI:
    """The fake's state: objects per cluster-wide collection, the event log, open watches.

    Args:
        kubelet_delay: seconds between a Binding and the kubelet's Running status update.
    """

    kubelet_delay: float = 0.002
    rv: int = 1000
    store: dict[str, dict[tuple[str, str], dict[str, Any]]] = field(default_factory=dict)
    log: dict[str, list[tuple[int, bytes]]] = field(default_factory=dict)
    watchers: dict[str, list[_Watcher]] = field(default_factory=dict)
    events_sent: int = 0
    binds: int = 0
    pending_kubelet: int = 0
    _lists: dict[str, tuple[int, list[dict[str, Any]]]] = field(default_factory=dict)

    # -- state ------------------------------------------------------------------------------------

    def bump(self) -> str:
        """The next resourceVersion."""
        self.rv += 1
        return str(self.rv)

    def seed(self, coll: str, objs: list[dict[str, Any]]) -> None:
        """Store ``objs`` (no events) with resourceVersions, uids and managedFields."""
        bucket = self.store.setdefault(coll, {})
        for o in objs:
            meta = o.setdefault("metadata", {})
            meta["resourceVersion"] = self.bump()
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", _now())
            bucket[(meta.get("namespace", ""), meta["name"])] = o

    def emit(self, coll: str, kind: str, obj: dict[str, Any]) -> None:
        """Log one event and write it to every watch of ``coll``."""
        line = orjson.dumps({"type": kind, "object": obj}) + b"\n"
        self.log.setdefault(coll, []).append((int(obj["metadata"]["resourceVersion"]), line))
        chunk = b"%x\r\n%s\r\n" % (len(line), line)
        for w in self.watchers.get(coll, []):
            if not w.closed:
                w.writer.write(chunk)
                self.events_sent += 1

    # -- pods -------------------------------------------------------------------------------------

    def create_pod(self, ns: str, pod: dict[str, Any]) -> dict[str, Any]:
        """Store a new pod as the API server does (uid, rv, creationTimestamp, Pending) and emit ADDED."""
        ts = _now()
        meta = pod.setdefault("metadata", {})
        meta["namespace"] = ns
        meta["uid"] = meta.get("uid") or str(uuid.uuid4())
        meta["creationTimestamp"] = ts
        meta["resourceVersion"] = self.bump()
        pod.setdefault("status", {"phase": "Pending", "qosClass": "Burstable"})
        self.store.setdefault(PODS, {})[(ns, meta["name"])] = pod
        self.emit(PODS, "ADDED", pod)
        return pod

    def bind(self, ns: str, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """BindingREST: set spec.nodeName + PodScheduled, emit MODIFIED; the kubelet follows."""
        pod = self.store.get(PODS, {}).get((ns, name))
        if pod is None:
            return 404, _status(404, "NotFound", f'pods "{name}" not found')
        uid = (body.get("metadata") or {}).get("uid")
        if uid and uid != pod["metadata"]["uid"]:
            return 409, _status(409, "Conflict", "Precondition failed: UID in precondition does not match")
        if pod["spec"].get("nodeName"):
            return 409, _status(409, "Conflict", f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"')
        ts = _now()
        pod = {**pod, "spec": {**pod["spec"], "nodeName": body["target"]["name"]}}
        cond = {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": ts}
        pod["status"] = {**pod["status"], "conditions": [cond]}
        pod["metadata"] = {
            **pod["metadata"],
            "resourceVersion": self.bump(),
            "managedFields": [*pod["metadata"].get("managedFields", []), scheduler_fields(ts)],
        }
        self.store[PODS][(ns, name)] = pod
        self.emit(PODS, "MODIFIED", pod)
        self.binds += 1
        self.pending_kubelet += 1
        asyncio.get_running_loop().call_later(self.kubelet_delay, self.kubelet_running, ns, name)
        return 201, SUCCESS

    def kubelet_running(self, ns: str, name: str) -> None:
        """The kubelet's status update: phase Running with its conditions; emit MODIFIED."""
        self.pending_kubelet -= 1
        pod = self.store[PODS].get((ns, name))
        if pod is None:
            return
        ts = _now()
        container = pod["spec"]["containers"][0]
        conds = [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": ts}
            for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ]
        status = {
            **pod["status"],
            "phase": "Running",
            "conditions": conds,
            "hostIP": "172.18.0.2",
            "podIP": "10.244.0.1",
            "podIPs": [{"ip": "10.244.0.1"}],
            "startTime": ts,
            "containerStatuses": [
                {
                    "name": container["name"],
                    "state": {"running": {"startedAt": ts}},
                    "lastState": {},
                    "ready": True,
                    "restartCount": 0,
                    "image": container.get("image", ""),
                    "imageID": "sha256:" + "0" * 64,
                    "containerID": "containerd://" + uuid.uuid4().hex + uuid.uuid4().hex,
                    "started": True,
                }
            ],
        }
        meta = {
            **pod["metadata"],
            "resourceVersion": self.bump(),
            "managedFields": [*pod["metadata"].get("managedFields", []), kubelet_fields(ts)],
        }
        pod = {**pod, "metadata": meta, "status": status}
        self.store[PODS][(ns, name)] = pod
        self.emit(PODS, "MODIFIED", pod)

    def patch(self, coll: str, ns: str, name: str, sub: str | None, body: Any) -> tuple[int, dict[str, Any]]:
        """Merge-patch one object (its status only for ``/status``); emit MODIFIED."""
        key = (ns or "", name)
        obj = self.store.get(coll, {}).get(key)
        if obj is None:
            return 404, _status(404, "NotFound", f'"{name}" not found')
        if sub == "status":
            body = {"status": body.get("status")} if isinstance(body, dict) else {}
        obj = _merge(obj, body)
        obj["metadata"]["resourceVersion"] = self.bump()
        self.store[coll][key] = obj
        self.emit(coll, "MODIFIED", obj)
        return 200, obj

    def touch(self, count: int) -> int:
        """Emit ``count`` MODIFIED events on bound pods (an annotation changes), like label churn."""
        pods = [k for k, p in self.store.get(PODS, {}).items() if p["spec"].get("nodeName")]
        done = 0
        for i in range(count):
            if not pods:
                break
            key = pods[i % len(pods)]
            pod = self.store[PODS][key]
            meta = dict(pod["metadata"])
            meta["annotations"] = {**(meta.get("annotations") or {}), "bench/touch": str(i)}
            meta["resourceVersion"] = self.bump()
            pod = {**pod, "metadata": meta}
            self.store[PODS][key] = pod
            self.emit(PODS, "MODIFIED", pod)
            done += 1
        return done

    # -- list -------------------------------------------------------------------------------------

    def list_page(self, coll: str, ns: str | None, query: dict[str, str]) -> dict[str, Any]:
        """One LIST page: items without kind/apiVersion, ``continue`` while more remain."""
        cont = query.get("continue", "")
        if cont:
            rv_s, _, start_s = cont.partition(":")
            rv, start = int(rv_s), int(start_s)
            items = self._lists[coll][1]
        else:
            rv, start = self.rv, 0
            bucket = self.store.get(coll, {})
            items = [
                {k: v for k, v in o.items() if k not in ("kind", "apiVersion")}
                for key, o in sorted(bucket.items())
                if ns is None or key[0] == ns
            ]
            self._lists[coll] = (rv, items)
        limit = int(query.get("limit") or 0) or max(1, len(items))
        page = items[start : start + limit]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if start + limit < len(items):
            meta["continue"] = f"{rv}:{start + limit}"
            meta["remainingItemCount"] = len(items) - start - limit
        return {"kind": "List", "apiVersion": "v1", "metadata": meta, "items": page}

    # -- HTTP -------------------------------------------------------------------------------------

    async def serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve HTTP/1.1 requests on one kept-alive connection."""
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {}
                for h in lines[1:]:
                    if h:
                        k, _, v = h.partition(":")
                        headers[k.strip().lower()] = v.strip()
                length = int(headers.get("content-length") or 0)
                raw = await reader.readexactly(length) if length else b""
                url = urlsplit(target)
                query = dict(parse_qsl(url.query))
                if method == "GET" and query.get("watch") == "true":
                    await self.watch(url.path, query, reader, writer)
                    return
                code, answer = self.handle(method, url.path, query, headers, raw)
                data = answer if isinstance(answer, bytes) else orjson.dumps(answer)
                writer.write(
                    b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                    % (code, len(data), data)
                )
                await writer.drain()
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    def handle(
        self, method: str, path: str, query: dict[str, str], headers: dict[str, str], raw: bytes
    ) -> tuple[int, Any]:
        """Answer one non-watch request: (HTTP status, JSON-able body or bytes)."""
        body = orjson.loads(raw) if raw else None
        if path == "/version":
            return 200, {"major": "1", "minor": "26", "gitVersion": "v1.26.0"}
        if path == "/bench/stats":
            return 200, {
                "events_sent": self.events_sent,
                "binds": self.binds,
                "pending_kubelet": self.pending_kubelet,
                "watchers": {c: sum(not w.closed for w in ws) for c, ws in self.watchers.items()},
                "rv": self.rv,
            }
        if path == "/bench/create":
            created = [self.create_pod(pod["metadata"].get("namespace", "default"), pod) for pod in body["pods"]]
            return 201, {"items": created}
        if path == "/bench/touch":
            return 200, {"touched": self.touch(int(body["count"]))}
        coll, ns, name, sub = _collection(path)
        if name is None:
            if method == "GET":
                return 200, orjson.dumps(self.list_page(coll, ns, query))
            if method == "POST" and coll == PODS and ns:
                return 201, self.create_pod(ns, body)
            return 405, _status(405, "MethodNotAllowed", "method not allowed")
        if method == "POST" and sub == "binding" and coll == PODS and ns:
            return self.bind(ns, name, body)
        if method == "PATCH":
            if headers.get("content-type") != "application/merge-patch+json":
                return 415, _status(415, "UnsupportedMediaType", "unsupported patch type")
            return self.patch(coll, ns or "", name, sub, body)
        if method == "GET":
            obj = self.store.get(coll, {}).get((ns or "", name))
            if obj is None:
                return 404, _status(404, "NotFound", f'"{name}" not found')
            return 200, obj
        return 405, _status(405, "MethodNotAllowed", "method not allowed")

    async def watch(
        self, path: str, query: dict[str, str], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Stream events of the collection after ``resourceVersion`` until timeoutSeconds or a hang-up."""
        coll, _, _, _ = _collection(path)
        since = int(query.get("resourceVersion") or self.rv)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        for rv, line in self.log.get(coll, []):
            if rv > since:
                writer.write(b"%x\r\n%s\r\n" % (len(line), line))
        w = _Watcher(writer)
        self.watchers.setdefault(coll, []).append(w)
        try:
            with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
                await asyncio.wait_for(reader.read(1), float(query.get("timeoutSeconds") or 300))
            w.closed = True
            with contextlib.suppress(Exception):
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        finally:
            w.closed = True
            self.watchers[coll].remove(w)


def serve(port: int, n_nodes: int, seed: int, ready: Any, kubelet_delay: float = 0.002) -> None:
    """Process entry point: build the bench cluster (bench/extender.py ``build_cluster``: nodes,
    ~20 running pods per node, NodeMetrics stamped now), seed it and serve on ``port`` forever.

    ``ready`` (a multiprocessing Event) is set once the socket listens.
    """
    from bench.extender import build_cluster, rfc3339

    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a service dependency
        pass
    cluster = build_cluster(n_nodes, seed)
    stamp = rfc3339(time.time())
    for metric in cluster.objects["NodeMetric"]:
        metric["status"]["updateTime"] = stamp
        metric.pop("kind", None)
        metric.pop("apiVersion", None)
    fake = FakeAPI(kubelet_delay=kubelet_delay)
    fake.seed(NODES, cluster.objects["Node"])
    for pod in cluster.objects["Pod"]:
        pod["metadata"]["creationTimestamp"] = stamp
        pod["metadata"]["managedFields"] = [dict(kubelet_fields(stamp))]
    fake.seed(PODS, cluster.objects["Pod"])
    fake.seed(NODEMETRICS, cluster.objects["NodeMetric"])
    del cluster

    async def main() -> None:
        server = await asyncio.start_server(fake.serve_connection, "127.0.0.1", port, limit=1 << 24)
        ready.set()
        async with server:
            await server.serve_forever()

    asyncio.run(main())
