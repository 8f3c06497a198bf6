"""The kubelet's CPU manager and topology manager settings, from its configuration file.

Upstream koordlet asks the kubelet's ``/configz`` (``pkg/koordlet/statesinformer/impl/kubelet_stub.go``)
and turns the answer into the ``kubelet.koordinator.sh/cpu-manager-policy`` annotation
(``pkg/koordlet/util/kubelet/kubelet.go`` ``GetStaticCPUManagerPolicyReservedCPUs``) and the
NodeResourceTopology's ``topologyPolicies`` (``getTopologyPolicy``). This agent reads the same fields
from the ``KubeletConfiguration`` file given as ``--kubelet-config`` (YAML or JSON, e.g.
``/var/lib/kubelet/config.yaml``): ``cpuManagerPolicy`` (default ``none``), ``cpuManagerPolicyOptions``,
``reservedSystemCPUs``, ``kubeReserved``/``systemReserved`` cpu, ``topologyManagerPolicy`` (default
``none``) and ``topologyManagerScope`` (default ``container``).

The static policy's reserved cpus are ``reservedSystemCPUs`` when given, else
``ceil(kubeReserved.cpu + systemReserved.cpu)`` cpus taken by topology (:func:`take_by_topology`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent.collectors.node import ProcessorInfo
from app.api.quantity import QuantityError, milli_value
from app.api.topology import (
    KUBELET_CPU_MANAGER_POLICY_NONE,
    KUBELET_CPU_MANAGER_POLICY_STATIC,
    TOPOLOGY_POLICY_NONE,
    CPUSetError,
    parse_cpuset,
)

#: kubelet topology manager policy -> NodeResourceTopology policy name, per scope (upstream ``getTopologyPolicy``).
_TOPOLOGY_POLICIES = {
    "container": {
        "single-numa-node": "SingleNUMANodeContainerLevel",
        "restricted": "RestrictedContainerLevel",
        "best-effort": "BestEffortContainerLevel",
        "none": TOPOLOGY_POLICY_NONE,
    },
    "pod": {
        "single-numa-node": "SingleNUMANodePodLevel",
        "restricted": "RestrictedPodLevel",
        "best-effort": "BestEffortPodLevel",
        "none": TOPOLOGY_POLICY_NONE,
    },
}


class KubeletConfigError(Exception):
    """The kubelet configuration file is unreadable or malformed; the message names the file and field."""


@dataclass(frozen=True, slots=True)
class KubeletConfig:
    """The kubelet settings the topology report uses.

    Attributes:
        cpu_manager_policy: ``none`` or ``static``.
        cpu_manager_policy_options: e.g. ``{"full-pcpus-only": "true"}``.
        reserved_system_cpus: the ``reservedSystemCPUs`` cpuset (empty when not set).
        reserved_cpu_milli: ``kubeReserved.cpu + systemReserved.cpu`` in milli-cores.
        topology_manager_policy / topology_manager_scope: as in the file (defaults ``none`` / ``container``).
    """

    cpu_manager_policy: str = KUBELET_CPU_MANAGER_POLICY_NONE
    cpu_manager_policy_options: dict[str, str] = field(default_factory=dict)
    reserved_system_cpus: frozenset[int] = frozenset()
    reserved_cpu_milli: int = 0
    topology_manager_policy: str = "none"
    topology_manager_scope: str = "container"

    @property
    def topology_policy(self) -> str:
        """The NodeResourceTopology ``topologyPolicies`` entry (``None`` for unknown combinations)."""
        return _TOPOLOGY_POLICIES.get(self.topology_manager_scope, {}).get(
            self.topology_manager_policy, TOPOLOGY_POLICY_NONE
        )

    def reserved_cpus(self, processors: list[ProcessorInfo] | tuple[ProcessorInfo, ...]) -> frozenset[int]:
        """The static policy's reserved cpus on this machine (empty for other policies)."""
        if self.cpu_manager_policy != KUBELET_CPU_MANAGER_POLICY_STATIC:
            return frozenset()
        if self.reserved_system_cpus:
            return self.reserved_system_cpus
        return take_by_topology(processors, math.ceil(self.reserved_cpu_milli / 1000))


def _map(doc: dict[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise KubeletConfigError(f"{key}: expected a map, got {type(value).__name__}")
    return value


def _str(doc: dict[str, Any], key: str, default: str) -> str:
    value = doc.get(key)
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        raise KubeletConfigError(f"{key}: expected a string, got {type(value).__name__}")
    return value


def parse_kubelet_config(doc: Any) -> KubeletConfig:
    """A ``KubeletConfiguration`` document (parsed YAML/JSON) -> :class:`KubeletConfig`.

    Raises:
        KubeletConfigError: not a map, a field of the wrong type, a bad cpuset or quantity, or a
            ``cpuManagerPolicy`` other than ``none``/``static`` (the kubelet refuses to start with it).
    """
    if not isinstance(doc, dict):
        raise KubeletConfigError("expected a KubeletConfiguration map")
    kind = doc.get("kind")
    if kind is not None and kind != "KubeletConfiguration":
        raise KubeletConfigError(f"kind: expected KubeletConfiguration, got {kind!r}")
    policy = _str(doc, "cpuManagerPolicy", KUBELET_CPU_MANAGER_POLICY_NONE)
    if policy not in (KUBELET_CPU_MANAGER_POLICY_NONE, KUBELET_CPU_MANAGER_POLICY_STATIC):
        raise KubeletConfigError(f"cpuManagerPolicy: expected none or static, got {policy!r}")
    options = {
        str(k): str(v).lower() if isinstance(v, bool) else str(v)
        for k, v in _map(doc, "cpuManagerPolicyOptions").items()
    }
    try:
        reserved = parse_cpuset(_str(doc, "reservedSystemCPUs", ""))
    except CPUSetError as exc:
        raise KubeletConfigError(f"reservedSystemCPUs: {exc}") from None
    milli = 0
    for key in ("kubeReserved", "systemReserved"):
        cpu = _map(doc, key).get("cpu")
        if cpu is None:
            continue
        try:
            milli += milli_value(cpu)
        except QuantityError as exc:
            raise KubeletConfigError(f"{key}.cpu: {exc}") from None
    return KubeletConfig(
        cpu_manager_policy=policy,
        cpu_manager_policy_options=options,
        reserved_system_cpus=reserved,
        reserved_cpu_milli=milli,
        topology_manager_policy=_str(doc, "topologyManagerPolicy", "none"),
        topology_manager_scope=_str(doc, "topologyManagerScope", "container"),
    )


def read_kubelet_config(path: Path) -> KubeletConfig:
    """Read and parse the kubelet configuration file at ``path``.

    Raises:
        KubeletConfigError: unreadable, not YAML/JSON, or malformed (the message names the file).
    """
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise KubeletConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise KubeletConfigError(f"{path}: not YAML or JSON: {exc}") from None
    try:
        return parse_kubelet_config(doc)
    except KubeletConfigError as exc:
        raise KubeletConfigError(f"{path}: {exc}") from None


def take_by_topology(processors: list[ProcessorInfo] | tuple[ProcessorInfo, ...], count: int) -> frozenset[int]:
    """``count`` cpus packed as the kubelet's static policy packs its reserved cpus
    (``takeByTopologyNUMAPacked`` on a free machine): whole sockets while ``count`` covers one, then whole
    physical cores, then single cpus, each in ascending (socket, core, cpu) order. Fewer cpus than
    ``count`` on the machine: all of them."""
    if count <= 0:
        return frozenset()
    free = sorted(processors, key=lambda p: (p.socket_id, p.core_id, p.cpu_id))
    taken: set[int] = set()

    def groups(key: str) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for p in free:
            if p.cpu_id not in taken:
                out.setdefault(getattr(p, key), []).append(p.cpu_id)
        return out

    for level in ("socket_id", "core_id"):
        for cpus in groups(level).values():
            if count - len(taken) >= len(cpus):
                taken.update(cpus)
    for p in free:
        if len(taken) >= count:
            break
        taken.add(p.cpu_id)
    return frozenset(taken)
