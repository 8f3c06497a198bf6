"""The NodeResourceTopology report: built from the machine's topology, the kubelet's settings and the pods,
written to a file (embedded) or through the API, and only when it changed.

Follows upstream ``pkg/koordlet/statesinformer/impl/states_noderesourcetopology.go``:

- zones: one per NUMA node, ``node-<id>`` of type ``Node``, with ``cpu`` (the node's cpu count),
  ``memory`` (its ``MemTotal``) and ``hugepages-1Gi``/``hugepages-2Mi`` (0: upstream reports huge pages
  only with its HugePageReport gate, off by default) as capacity = allocatable = available, resources
  sorted by name, zones by name;
- ``topologyPolicies``: ``[<kubelet topology manager policy at its scope>]``, ``["None"]`` by default;
- annotations (:mod:`app.api.topology`): ``cpu-basic-info``, ``cpu-topology``, ``cpu-shared-pools`` (per
  NUMA node, the cpus minus every pod's ``resource-status`` cpuset minus the node's reserved cpus of
  ``node.koordinator.sh/reservation``; the kubelet's reserved cpus stay in the pool, as upstream keeps
  them for Burstable pods; cpus the kubelet's static policy gave to pods leave it too),
  ``kubelet.koordinator.sh/cpu-manager-policy``, ``node.koordinator.sh/system-qos-resource`` (the Node's
  annotation of that name, ``{}`` when absent; its cpus leave the shared pools unless ``cpusetExclusive`` is
  false, upstream ``removeSystemQOSCPUs``), ``pod-cpu-allocs`` (those kubelet allocations,
  :mod:`agent.cpumanagerstate`; ``null`` when none) and ``node.koordinator.sh/reservation``;
- the object carries ``app.kubernetes.io/managed-by: Koordinator`` and, when the Node's uid is known,
  an owner reference to the Node (so it is deleted with the node);
- it is written only when it changed (``isChanged``: topology policies, the managed annotations compared
  as JSON values, zone names, types and cpu/memory/huge-page quantities); an existing object keeps its
  other annotations, labels and zones.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from agent.collectors.cputopology import MachineTopology
from agent.kubeletconfig import KubeletConfig, take_by_topology
from agent.qos.cpuset import ResourceStatusError, parse_resource_status
from agent.reporter import ReportError
from app.api.kinds import KINDS
from app.api.quantity import QuantityError, format_resource, milli_value, resource_value
from app.api.topology import (
    ANNOTATION_CPU_BASIC_INFO,
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_NODE_CPU_ALLOCS,
    ANNOTATION_NODE_CPU_SHARED_POOLS,
    ANNOTATION_NODE_CPU_TOPOLOGY,
    ANNOTATION_NODE_RESERVATION,
    ANNOTATION_NODE_SYSTEM_QOS_RESOURCE,
    ANNOTATION_RESOURCE_STATUS,
    LABEL_MANAGED_BY,
    MANAGED_ANNOTATIONS,
    MANAGED_BY,
    TOPOLOGY_POLICY_NONE,
    ZONE_TYPE_NODE,
    CPUSetError,
    dumps_annotation,
    format_cpuset,
    parse_cpuset,
    zone_name,
)
from app.client.errors import ApiError, Conflict, NotFound

if TYPE_CHECKING:
    from app.client.sync import Client

log = logging.getLogger("agent.topology")

#: Resources the agent owns in each zone (upstream ``managedNRTResources`` without the GPU).
MANAGED_RESOURCES = ("cpu", "memory", "hugepages-2Mi", "hugepages-1Gi")
NRT = KINDS["NodeResourceTopology"]


@dataclass(slots=True)
class TopologyStatus:
    """What the agent owns on its NodeResourceTopology (upstream ``nodeTopologyStatus``).

    Attributes:
        annotations: the managed annotations, JSON strings.
        topology_policy: the single ``topologyPolicies`` entry.
        zones: the NUMA zones, as written.
    """

    annotations: dict[str, str]
    topology_policy: str = TOPOLOGY_POLICY_NONE
    zones: list[dict[str, Any]] = field(default_factory=list)

    def changed_from(self, current: dict[str, Any] | None) -> str | None:
        """Why ``current`` (a NodeResourceTopology) differs from this status, or None when it does not."""
        if not current:
            return "no object"
        meta = current.get("metadata") or {}
        annotations = meta.get("annotations")
        if not isinstance(annotations, dict):
            return "metadata changed"
        if current.get("topologyPolicies") != [self.topology_policy]:
            return "topologyPolicies changed"
        for key in MANAGED_ANNOTATIONS:
            old, new = annotations.get(key), self.annotations.get(key)
            if old is None and new is None:
                continue
            if old is None or new is None or _json_value(old) != _json_value(new):
                return f"annotation {key} changed"
        return _zones_differ(current.get("zones"), self.zones)

    def apply_to(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``obj`` with this status written over it (other annotations, labels, zones kept)."""
        meta = dict(obj.get("metadata") or {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **self.annotations}
        meta["labels"] = {**(meta.get("labels") or {}), LABEL_MANAGED_BY: MANAGED_BY}
        ours = {z["name"] for z in self.zones}
        others = [  # zones of other reporters stay; NUMA zones this machine no longer has go (TrimDifferentZone)
            z
            for z in obj.get("zones") or []
            if isinstance(z, dict) and z.get("name") not in ours and z.get("type") != ZONE_TYPE_NODE
        ]
        zones = sorted([*others, *self.zones], key=lambda z: str(z.get("name")))
        return {**obj, "metadata": meta, "topologyPolicies": [self.topology_policy], "zones": zones}


def _json_value(text: Any) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def _zone_quantities(zone: dict[str, Any]) -> dict[str, tuple[int, ...]] | None:
    """The managed resources of ``zone``: name -> (capacity, allocatable, available); None when one is malformed."""
    out: dict[str, tuple[int, ...]] = {}
    for res in zone.get("resources") or []:
        if not isinstance(res, dict) or res.get("name") not in MANAGED_RESOURCES:
            continue
        name = res["name"]
        try:
            out[name] = tuple(resource_value(name, res.get(k)) for k in ("capacity", "allocatable", "available"))
        except QuantityError:
            return None
    return out


def _zones_differ(old: Any, new: list[dict[str, Any]]) -> str | None:
    old_zones = [z for z in old if isinstance(z, dict)] if isinstance(old, list) else []
    mine = {z["name"] for z in new}
    old_mine = [z for z in old_zones if z.get("name") in mine or z.get("type") == ZONE_TYPE_NODE]
    if len(old_mine) != len(new):
        return "zones number"
    by_name = {z.get("name"): z for z in old_mine}
    for zone in new:
        cur = by_name.get(zone["name"])
        if cur is None or cur.get("type") != zone["type"]:
            return f"zone {zone['name']}"
        if _zone_quantities(cur) != _zone_quantities(zone):
            return f"zone {zone['name']} resources"
    return None


def _zones(machine: MachineTopology) -> list[dict[str, Any]]:
    zones = []
    for nid in machine.numa_nodes:
        values = {
            "cpu": len(machine.cpus_of_node(nid)) * 1000,
            "hugepages-1Gi": 0,
            "hugepages-2Mi": 0,
            "memory": machine.numa_memory.get(nid, 0),
        }
        resources = []
        for name in sorted(values):
            q = format_resource(name, values[name])
            resources.append({"name": name, "capacity": q, "allocatable": q, "available": q})
        zones.append({"name": zone_name(nid), "type": ZONE_TYPE_NODE, "resources": resources})
    return sorted(zones, key=lambda z: z["name"])


def _node_annotation_object(node: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    """The Node's annotation ``name`` decoded as a JSON object; None when absent or empty.

    Raises:
        ValueError: not JSON, or JSON that is not an object.
    """
    raw = ((node or {}).get("metadata") or {}).get("annotations", {}).get(name)
    if not raw:
        return None
    anno = json.loads(raw)
    if not isinstance(anno, dict):
        raise ValueError("expected an object")
    return anno


def node_reservation(machine: MachineTopology, node: dict[str, Any] | None) -> dict[str, Any]:
    """The Node's ``node.koordinator.sh/reservation`` with ``reservedCPUs`` resolved on this machine
    (upstream ``getNodeReserved``: the cpuset as given, else ``resources.cpu`` cpus taken by topology);
    ``{}`` when absent or malformed (logged)."""
    try:
        anno = _node_annotation_object(node, ANNOTATION_NODE_RESERVATION)
        if anno is None:
            return {}
        out: dict[str, Any] = {}
        if isinstance(anno.get("resources"), dict):
            out["resources"] = anno["resources"]
        if anno.get("reservedCPUs"):
            out["reservedCPUs"] = format_cpuset(parse_cpuset(str(anno["reservedCPUs"])))
        elif "cpu" in (anno.get("resources") or {}):
            count = math.ceil(milli_value(anno["resources"]["cpu"]) / 1000)
            cpus = take_by_topology(machine.processors, count)
            if cpus:
                out["reservedCPUs"] = format_cpuset(cpus)
        if anno.get("applyPolicy"):
            out["applyPolicy"] = anno["applyPolicy"]
        return out
    except (ValueError, TypeError, QuantityError, CPUSetError) as exc:
        log.warning("ignoring malformed %s: %s", ANNOTATION_NODE_RESERVATION, exc)
        return {}


def system_qos_resource(node: dict[str, Any] | None) -> dict[str, Any]:
    """The Node's ``node.koordinator.sh/system-qos-resource`` (``{"cpuset": "0-1", "cpusetExclusive": bool}``)
    as upstream re-marshals it (``cpuset`` normalised, empty fields left out); ``{}`` when absent or malformed
    (logged)."""
    try:
        anno = _node_annotation_object(node, ANNOTATION_NODE_SYSTEM_QOS_RESOURCE)
        if anno is None:
            return {}
        out: dict[str, Any] = {}
        if anno.get("cpuset"):
            out["cpuset"] = format_cpuset(parse_cpuset(str(anno["cpuset"])))
        exclusive = anno.get("cpusetExclusive")
        if exclusive is not None:
            if not isinstance(exclusive, bool):
                raise ValueError("cpusetExclusive must be a boolean")
            out["cpusetExclusive"] = exclusive
        return out
    except (ValueError, CPUSetError) as exc:
        log.warning("ignoring malformed %s: %s", ANNOTATION_NODE_SYSTEM_QOS_RESOURCE, exc)
        return {}


def _pod_cpusets(pods: list[dict[str, Any]]) -> set[int]:
    """The cpus of the pods' ``resource-status`` cpusets, parsed as the cpuset strategy and the container hooks parse
    them (:func:`agent.qos.cpuset.parse_resource_status`, upstream ``GetResourceStatus``); a malformed annotation
    is logged and its pod skipped."""
    held: set[int] = set()
    for pod in pods:
        meta = pod.get("metadata") or {}
        try:
            held |= parse_resource_status((meta.get("annotations") or {}).get(ANNOTATION_RESOURCE_STATUS)).cpuset
        except ResourceStatusError as exc:
            log.warning(
                "pod %s/%s: ignoring malformed %s: %s",
                meta.get("namespace"),
                meta.get("name"),
                ANNOTATION_RESOURCE_STATUS,
                exc,
            )
    return held


def build_topology_status(
    machine: MachineTopology,
    kubelet: KubeletConfig | None,
    pods: list[dict[str, Any]],
    node: dict[str, Any] | None,
    kubelet_allocs: list[dict[str, Any]] | None = None,
) -> TopologyStatus:
    """The status to publish (see the module docstring).

    Args:
        machine: the machine's topology.
        kubelet: the kubelet's settings (None: not known; the policy annotation is ``{}``, topology ``None``).
        pods: the node's raw pods (their ``resource-status`` cpusets leave the shared pool).
        node: the Node (its reservation annotation and uid), None when unknown.
        kubelet_allocs: ``pod-cpu-allocs`` entries of the kubelet's static CPU manager
            (:func:`agent.cpumanagerstate.pod_cpu_allocs`); their cpus leave the shared pool.
    """
    detail = [{"id": p.cpu_id, "core": p.core_id, "socket": p.socket_id, "node": p.node_id} for p in machine.processors]
    detail.sort(key=lambda d: d["id"])
    policy: dict[str, Any] = {}
    topology_policy = TOPOLOGY_POLICY_NONE
    if kubelet is not None:
        policy["policy"] = kubelet.cpu_manager_policy
        if kubelet.cpu_manager_policy_options:
            policy["options"] = dict(sorted(kubelet.cpu_manager_policy_options.items()))
        reserved_kubelet = kubelet.reserved_cpus(machine.processors)
        if reserved_kubelet:
            policy["reservedCPUs"] = format_cpuset(reserved_kubelet)
        topology_policy = kubelet.topology_policy
    reservation = node_reservation(machine, node)
    taken = _pod_cpusets(pods) | parse_cpuset(reservation.get("reservedCPUs", ""))
    for alloc in kubelet_allocs or []:
        taken |= parse_cpuset(alloc["cpuset"])
    system_qos = system_qos_resource(node)
    if system_qos.get("cpuset") and system_qos.get("cpusetExclusive", True):
        taken |= parse_cpuset(system_qos["cpuset"])
    pools = []
    for nid in machine.numa_nodes:
        cpus = [p for p in machine.processors if p.node_id == nid]
        free = {p.cpu_id for p in cpus} - taken
        if not cpus or not free:
            continue
        pool: dict[str, Any] = {"socket": cpus[0].socket_id, "node": nid, "cpuset": format_cpuset(free)}
        pools.append(pool)
    pools.sort(key=lambda p: (p["socket"], p["node"]))
    annotations = {
        ANNOTATION_CPU_BASIC_INFO: dumps_annotation(machine.basic_info()),
        ANNOTATION_NODE_CPU_TOPOLOGY: dumps_annotation({"detail": detail}),
        ANNOTATION_NODE_CPU_SHARED_POOLS: dumps_annotation(pools),
        ANNOTATION_KUBELET_CPU_MANAGER_POLICY: dumps_annotation(policy),
        ANNOTATION_NODE_CPU_ALLOCS: dumps_annotation(kubelet_allocs or None),
        ANNOTATION_NODE_RESERVATION: dumps_annotation(reservation),
        ANNOTATION_NODE_SYSTEM_QOS_RESOURCE: dumps_annotation(system_qos),
    }
    return TopologyStatus(annotations, topology_policy, _zones(machine))


def new_object(node_name: str, node: dict[str, Any] | None) -> dict[str, Any]:
    """An empty NodeResourceTopology for ``node_name`` as upstream's ``newNodeTopo`` creates it."""
    meta: dict[str, Any] = {"name": node_name, "labels": {LABEL_MANAGED_BY: MANAGED_BY}}
    uid = ((node or {}).get("metadata") or {}).get("uid")
    if uid:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "name": node_name,
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": NRT.api_version,
        "kind": NRT.kind,
        "metadata": meta,
        "topologyPolicies": [TOPOLOGY_POLICY_NONE],
        "zones": [],
    }


class TopologyWriter(ABC):
    """Delivers the NodeResourceTopology."""

    @abstractmethod
    def publish(self, node_name: str, status: TopologyStatus, node: dict[str, Any] | None) -> bool:
        """Write ``status`` unless the stored object already says the same; True when written.

        Raises:
            ReportError: it could not be read or written.
        """


class FileTopologyWriter(TopologyWriter):
    """Embedded mode: ``<dir>/noderesourcetopology-<node>.yaml`` next to the NodeMetric, replaced atomically."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def path(self, node_name: str) -> Path:
        """The file of ``node_name``'s NodeResourceTopology."""
        return self.directory / f"noderesourcetopology-{node_name}.yaml"

    def publish(self, node_name: str, status: TopologyStatus, node: dict[str, Any] | None) -> bool:
        """Rewrite the file when its object differs from ``status`` (a missing or unreadable file differs)."""
        path = self.path(node_name)
        current: dict[str, Any] | None = None
        try:
            loaded = yaml.safe_load(path.read_text())
            current = loaded if isinstance(loaded, dict) else None
        except (OSError, yaml.YAMLError):
            current = None
        reason = status.changed_from(current)
        if reason is None:
            return False
        obj = status.apply_to(current if current and current.get("kind") == NRT.kind else new_object(node_name, node))
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".noderesourcetopology-", suffix=".tmp", dir=self.directory)
            try:
                with os.fdopen(fd, "w") as f:
                    yaml.safe_dump(obj, f, sort_keys=False)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise ReportError(f"cannot write {path}: {exc}") from None
        log.info("NodeResourceTopology %s written to %s (%s)", node_name, path, reason)
        return True


class APITopologyWriter(TopologyWriter):
    """Kubernetes mode: GET the object, create it when missing, PUT it when it differs (upstream's
    ``createNodeTopoIfNotExist`` then ``Update`` under ``RetryOnConflict``: one retry on a conflict).

    Args:
        client: the agent's API client (:class:`app.client.sync.Client`).
    """

    def __init__(self, client: Client) -> None:
        self.client = client

    def publish(self, node_name: str, status: TopologyStatus, node: dict[str, Any] | None) -> bool:
        """Create or update the object when it differs from ``status``.

        Raises:
            ReportError: the API refused a call (the message carries its Status message), no answer
                came, or the conflict persisted.
        """
        collection = NRT.collection_path(None)
        path = f"{collection}/{node_name}"
        for _attempt in range(2):
            try:
                try:
                    current = self.client.get(path)
                except NotFound:
                    self.client.create(collection, status.apply_to(new_object(node_name, node)))
                    log.info("NodeResourceTopology %s created", node_name)
                    return True
                reason = status.changed_from(current)
                if reason is None:
                    return False
                self.client.put(path, status.apply_to(current))
                log.info("NodeResourceTopology %s updated (%s)", node_name, reason)
                return True
            except Conflict:  # a racing create, or a stale resourceVersion
                continue
            except ApiError as exc:
                code = f"HTTP {exc.status}: " if exc.status else ""
                raise ReportError(f"NodeResourceTopology {node_name}: {code}{exc}") from None
        raise ReportError(f"NodeResourceTopology {node_name}: conflict persisted")
