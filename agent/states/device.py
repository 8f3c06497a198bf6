"""The node's ``Device`` object (``scheduling.koordinator.sh/v1alpha1``), as upstream koordlet's states
informer writes it (``pkg/koordlet/statesinformer/impl/states_device_linux.go``).

:func:`device_object` builds it from the discovered GPUs and RDMA NICs: named after the node, owned by the
Node (``controller``, ``blockOwnerDeletion``; only when the Node's uid is known), one entry per device
sorted by type then minor:

- GPU: ``type: gpu``, ``id`` = UUID, ``minor``, ``health``, resources ``koordinator.sh/gpu-core: 100``,
  ``koordinator.sh/gpu-memory: <total bytes>`` (BinarySI), ``koordinator.sh/gpu-memory-ratio: 100``,
  ``topology {socketID: -1, nodeID, pcieID, busID}`` when the NUMA node (>= 0), PCIe root and bus id are
  known, and for an unhealthy GPU a ``Healthy=False`` condition with the reason (``Xid79``, ``NVMLError``);
- RDMA: ``type: rdma``, ``id`` = PCI address, ``minor``, ``health``, ``koordinator.sh/rdma: 100``,
  topology (same rule), ``vfGroups`` of its VFs (``minor: -1``, ``busID``) when SR-IOV is on;
- labels ``node.koordinator.sh/gpu-vendor: nvidia``, ``gpu-model`` (normalised NVML name) and
  ``gpu-driver-version`` when there are GPUs.

Writers deliver it: :class:`APIDeviceWriter` (GET; create on NotFound; PUT only when the devices or
labels differ, semantically; retried on conflict and 429, as upstream's ``RetryOnConflictOrTooManyRequests``)
and :class:`FileDeviceWriter` (embedded mode: ``device-<node>.yaml`` next to the NodeMetric file).
A condition whose status did not change keeps its ``lastTransitionTime``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from agent.collectors.gpu import GPUInfo
from agent.collectors.rdma import RDMAInfo
from app.api import devicenames as dn
from app.api.kinds import KINDS
from app.api.quantity import QuantityError, format_resource, parse_resource_list
from app.api.scheduling import DeviceInfo
from app.api.timeparse import format_time
from app.client.errors import AlreadyExists, ApiError, Conflict, NotFound, TooManyRequests

if TYPE_CHECKING:
    from app.client.sync import Client

log = logging.getLogger("agent.device")

_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
#: client-go's ``retry.DefaultRetry``: 5 tries, 10 ms apart (x5 each time, 1 s at most).
RETRY_STEPS = 5
RETRY_DELAY = 0.01


class DeviceReportError(Exception):
    """The Device could not be written; the message names the object and the reason."""


def _topology(numa: int, pcie: str, bus: str) -> dict[str, Any] | None:
    if numa < 0 or not pcie or not bus:
        return None
    return {"socketID": -1, "nodeID": numa, "pcieID": pcie, "busID": bus}


def gpu_entry(gpu: GPUInfo, now: float) -> dict[str, Any]:
    """The ``spec.devices`` entry of one GPU (``now``: epoch seconds for a new condition's transition time)."""
    entry: dict[str, Any] = {
        "type": dn.DEVICE_GPU,
        "id": gpu.uuid,
        "minor": gpu.minor,
        "health": gpu.healthy,
        "resources": {
            dn.RESOURCE_GPU_CORE: "100",
            dn.RESOURCE_GPU_MEMORY: format_resource("memory", gpu.memory_total),
            dn.RESOURCE_GPU_MEMORY_RATIO: "100",
        },
    }
    topology = _topology(gpu.numa_node, gpu.pcie_root, gpu.bus_id)
    if topology is not None:
        entry["topology"] = topology
    if not gpu.healthy:
        entry["conditions"] = [
            {
                "type": dn.CONDITION_HEALTHY,
                "status": "False",
                "lastTransitionTime": format_time(now),
                "reason": gpu.reason or "Unknown",
                "message": gpu.message or "device is unhealthy",
            }
        ]
    return entry


def rdma_entry(nic: RDMAInfo) -> dict[str, Any]:
    """The ``spec.devices`` entry of one RDMA NIC."""
    entry: dict[str, Any] = {
        "type": dn.DEVICE_RDMA,
        "id": nic.bus_id,
        "minor": nic.minor,
        "health": nic.healthy,
        "resources": {dn.RESOURCE_RDMA: "100"},
    }
    topology = _topology(nic.numa_node, nic.pcie_root, nic.bus_id)
    if topology is not None:
        entry["topology"] = topology
    if nic.vfs:
        entry["vfGroups"] = [{"vfs": [{"minor": -1, "busID": vf} for vf in nic.vfs]}]
    return entry


def gpu_labels(gpus: list[GPUInfo], driver_version: str) -> dict[str, str]:
    """Vendor, model and driver labels; the model only when every GPU has the same name (as upstream)."""
    if not gpus:
        return {}
    labels = {dn.LABEL_GPU_VENDOR: dn.GPU_VENDOR_NVIDIA}
    models = {g.model for g in gpus}
    if len(models) == 1 and "" not in models:
        labels[dn.LABEL_GPU_MODEL] = dn.gpu_model_label(models.pop())
    elif len(models) > 1:
        log.warning("GPUs of different models %s: no %s label", sorted(models), dn.LABEL_GPU_MODEL)
    if driver_version:
        labels[dn.LABEL_GPU_DRIVER_VERSION] = driver_version
    return labels


def _sort_key(entry: dict[str, Any]) -> tuple[str, int]:
    return (str(entry.get("type") or ""), int(entry.get("minor") or 0))


def device_object(
    node_name: str,
    node_uid: str | None,
    gpus: list[GPUInfo],
    rdmas: list[RDMAInfo],
    driver_version: str,
    now: float | None = None,
) -> dict[str, Any]:
    """The whole Device object (see the module docstring).

    Raises:
        DeviceReportError: an entry does not validate against the DeviceInfo model.
    """
    now = time.time() if now is None else now
    devices = [gpu_entry(g, now) for g in gpus] + [rdma_entry(r) for r in rdmas]
    devices.sort(key=_sort_key)
    for i, dev in enumerate(devices):
        try:
            DeviceInfo.model_validate(dev)
        except ValidationError as exc:
            raise DeviceReportError(f"Device {node_name} spec.devices[{i}] does not validate: {exc}") from None
    meta: dict[str, Any] = {"name": node_name}
    labels = gpu_labels(gpus, driver_version)
    if labels:
        meta["labels"] = labels
    if node_uid:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "name": node_name,
                "uid": node_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": KINDS["Device"].api_version,
        "kind": "Device",
        "metadata": meta,
        "spec": {"devices": devices},
    }


def _canonical_device(dev: dict[str, Any]) -> dict[str, Any]:
    out = dict(dev)
    with contextlib.suppress(QuantityError):
        out["resources"] = parse_resource_list(dev.get("resources"))
    return out


def same_devices(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Devices and labels equal, semantically (``"100"`` equals ``100``; entries compared in (type, minor)
    order), as upstream compares before an update."""
    da = sorted((a.get("spec") or {}).get("devices") or [], key=_sort_key)
    db = sorted((b.get("spec") or {}).get("devices") or [], key=_sort_key)
    la = (a.get("metadata") or {}).get("labels") or {}
    lb = (b.get("metadata") or {}).get("labels") or {}
    return la == lb and [_canonical_device(d) for d in da] == [_canonical_device(d) for d in db]


def keep_transition_times(desired: dict[str, Any], current: dict[str, Any] | None) -> dict[str, Any]:
    """``desired`` with each condition's ``lastTransitionTime`` taken from ``current`` (same device id, same
    condition type) when its status did not change."""
    if not current:
        return desired
    old: dict[tuple[str, str], dict[str, Any]] = {}
    for dev in (current.get("spec") or {}).get("devices") or []:
        for cond in dev.get("conditions") or []:
            old[(str(dev.get("id")), str(cond.get("type")))] = cond
    for dev in desired["spec"]["devices"]:
        for cond in dev.get("conditions") or []:
            prev = old.get((str(dev.get("id")), str(cond.get("type"))))
            if prev is not None and prev.get("status") == cond.get("status") and prev.get("lastTransitionTime"):
                cond["lastTransitionTime"] = prev["lastTransitionTime"]
    return desired


class DeviceWriter(ABC):
    """Delivers the Device object."""

    @abstractmethod
    def write(self, desired: dict[str, Any], *, create: bool = True) -> bool:
        """Create or update the Device; True when something was written, False when it was up to date (or
        missing and ``create`` is False: a node without devices gets no Device, one whose devices went away
        gets its Device emptied).

        Raises:
            DeviceReportError: it could not be written.
        """


class APIDeviceWriter(DeviceWriter):
    """Kubernetes mode: GET the Device, create it when missing, PUT it when its devices or labels differ.

    Args:
        client: the agent's API client (:class:`app.client.sync.Client`).
        sleep: called between retries (tests pass a no-op).
    """

    def __init__(self, client: Client, sleep: Any = time.sleep) -> None:
        self.client = client
        self.sleep = sleep

    def write(self, desired: dict[str, Any], *, create: bool = True) -> bool:
        """See :class:`DeviceWriter`. Conflicts (stale resourceVersion, a racing create) and 429 are retried
        up to :data:`RETRY_STEPS` times."""
        name = desired["metadata"]["name"]
        collection = KINDS["Device"].collection_path(None)
        path = f"{collection}/{name}"
        delay = RETRY_DELAY
        last: ApiError | None = None
        for _attempt in range(RETRY_STEPS):
            try:
                try:
                    current = self.client.get(path)
                except NotFound:
                    if not create:
                        return False
                    self.client.create(collection, desired)
                    log.info("created Device %s (%d devices)", name, len(desired["spec"]["devices"]))
                    return True
                keep_transition_times(desired, current)
                meta = dict(current.get("metadata") or {})
                owner_missing = "ownerReferences" in desired["metadata"] and not meta.get("ownerReferences")
                if same_devices(desired, current) and not owner_missing:
                    return False
                labels = (desired["metadata"].get("labels")) or None
                if labels is None:
                    meta.pop("labels", None)
                else:
                    meta["labels"] = labels
                if owner_missing:  # created before the Node's uid was known
                    meta["ownerReferences"] = desired["metadata"]["ownerReferences"]
                body = {**current, "metadata": meta, "spec": {**(current.get("spec") or {}), **desired["spec"]}}
                self.client.put(path, body)
                log.info("updated Device %s", name)
                return True
            except (Conflict, TooManyRequests) as exc:  # AlreadyExists is a Conflict: a racing create
                last = exc
                if isinstance(exc, TooManyRequests) and exc.retry_after:
                    self.sleep(min(exc.retry_after, 1.0))
                else:
                    self.sleep(delay)
                delay = min(delay * 5, 1.0)
                continue
            except ApiError as exc:
                code = f"HTTP {exc.status}: " if exc.status else ""
                raise DeviceReportError(f"Device {name}: {code}{exc}") from None
        kind = "already exists" if isinstance(last, AlreadyExists) else "conflict persisted"
        raise DeviceReportError(f"Device {name}: {kind} after {RETRY_STEPS} tries: {last}")


class FileDeviceWriter(DeviceWriter):
    """Embedded mode: ``<dir>/device-<node>.yaml``, replaced atomically, written only when it changed."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._last: dict[str, Any] | None = None

    def path(self, node_name: str) -> Path:
        """The file of ``node_name``'s Device."""
        return self.directory / f"device-{node_name}.yaml"

    def _current(self, path: Path) -> dict[str, Any] | None:
        if self._last is not None:
            return self._last
        try:
            obj = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            return None
        return obj if isinstance(obj, dict) else None

    def write(self, desired: dict[str, Any], *, create: bool = True) -> bool:
        """See :class:`DeviceWriter`."""
        path = self.path(desired["metadata"]["name"])
        if not create and not path.exists():
            return False
        current = self._current(path)
        keep_transition_times(desired, current)
        if current is not None and same_devices(desired, current) and path.exists():
            return False
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".device-", suffix=".tmp", dir=self.directory)
            try:
                with os.fdopen(fd, "w") as f:
                    yaml.dump(desired, f, Dumper=_DUMPER, sort_keys=False)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise DeviceReportError(f"cannot write {path}: {exc}") from None
        self._last = desired
        return True
