"""Disk IO per QoS class: ``blkioQOS`` to blkio throttle and weight files (v1) or ``io.max`` / ``io.weight`` (v2).

Follows upstream ``pkg/koordlet/qosmanager/plugins/blkio/blkio_reconcile.go``:

- Only ``beClass`` is enforced, on the besteffort QoS dir; ``lsrClass`` / ``lsClass`` with blocks are logged as
  unsupported, as upstream does (a limit on a latency-sensitive class is what the design avoids).
- Per block of type ``device`` (``/dev/vdb``, or ``vdb``), resolved to ``MAJOR:MINOR`` from
  ``<sys>/class/block/<name>/dev`` (a partition counts as its disk, as upstream's ``PartitionDiskMap``):
  ``blkio.throttle.read_iops_device``, ``read_bps_device``, ``write_iops_device``, ``write_bps_device`` =
  ``readIOPS`` / ``readBPS`` / ``writeIOPS`` / ``writeBPS`` (0 = no limit, the default) and
  ``blkio.cost.weight`` = ``ioWeightPercent`` (default 100; Anolis blk-iocost, ``io.weight`` on v2). On v2
  the throttles are keys of ``io.max`` (``rbps``, ``wbps``, ``riops``, ``wiops``; 0 written as ``max``).
- A device found in those files but no longer configured (the class disabled, a block removed) is reset:
  throttles 0, weight 100 (upstream's remover).
- cgroup v1's blk-throttle is flat (the kernel applies a group's limits to its own tasks only, not to child
  groups, outside the v2 hierarchy), so on v1 the class's values are also written to each pod dir and container
  dir under besteffort, where the pods' tasks are: each is then limited on its own. On v2 the besteffort dir's
  ``io.max`` bounds the whole class, as upstream intends.
- ``volumegroup`` and ``podvolume`` blocks need the node's local storage inventory (LVM, CSI mounts), which
  this agent does not collect: they are logged and skipped.

Units: bytes per second (``*BPS``), IO operations per second (``*IOPS``), percent (``ioWeightPercent``).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from agent.cgroups import RESOURCES, CgroupLayout, CgroupPathError, CgroupVersion, read_text
from agent.executor import CgroupWrite
from agent.states.pods import PodMeta
from app.api.slo import BlockCfg, NodeSLOSpec

log = logging.getLogger("agent.qos.blkio")

#: Upstream's defaults: no throttle, weight 100 %.
DEFAULT_IO_WEIGHT_PERCENT = 100
THROTTLES = (
    ("blkio.throttle.read_iops_device", "read_iops"),
    ("blkio.throttle.read_bps_device", "read_bps"),
    ("blkio.throttle.write_iops_device", "write_iops"),
    ("blkio.throttle.write_bps_device", "write_bps"),
)
WEIGHT = "blkio.cost.weight"
_DEVNUM = re.compile(r"^\d+:\d+$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,127}$")


class BlockDeviceError(ValueError):
    """A NodeSLO block names no block device of this node; the message names it."""


def device_number(name: str, sys_root: Path = Path("/sys")) -> str:
    """``MAJOR:MINOR`` of a block device named ``/dev/<name>`` or ``<name>``; a partition resolves to its disk.

    Raises:
        BlockDeviceError: not a plain device name, or no such block device under ``<sys>/class/block``.
    """
    base = name[len("/dev/") :] if name.startswith("/dev/") else name
    if not _NAME.match(base) or ".." in base:
        raise BlockDeviceError(f"block device {name!r} is not a plain /dev name")
    entry = sys_root / "class" / "block" / base
    try:
        if (entry / "partition").exists():
            entry = entry.resolve().parent
        number = read_text(entry / "dev")
    except OSError:
        raise BlockDeviceError(f"block device {name!r} not found under {sys_root / 'class' / 'block'}") from None
    if not _DEVNUM.match(number):
        raise BlockDeviceError(f"block device {name!r}: {entry / 'dev'} holds {number!r}, not MAJOR:MINOR")
    return number


def configured_devices(layout: CgroupLayout, rel_dir: str) -> set[str]:
    """``MAJOR:MINOR`` of every device that has a line in the dir's throttle / weight files (v2: ``io.max``,
    ``io.weight``); empty when the dir or files are missing."""
    names = {RESOURCES[r].v2_name if layout.version == CgroupVersion.V2 else r for r, _ in THROTTLES}
    names.add(RESOURCES[WEIGHT].v2_name if layout.version == CgroupVersion.V2 else WEIGHT)
    found: set[str] = set()
    try:
        base = layout.dir_path("blkio", rel_dir)
    except CgroupPathError:
        return found
    for name in names:
        try:
            text = read_text(base / str(name))
        except OSError:
            continue
        for line in text.splitlines():
            first = line.split(" ", 1)[0]
            if _DEVNUM.match(first):
                found.add(first)
    return found


def block_writes(rel_dir: str, device: str, block: BlockCfg | None) -> list[CgroupWrite]:
    """The five writes of one device: throttles (0 = no limit) and weight from the block's ``ioCfg``, or the
    reset values when ``block`` is None."""
    io = block.io_cfg if block is not None else None
    reason = "BlkioReconcile" if block is not None else "BlkioReconcile: reset"
    writes = []
    for resource, attr in THROTTLES:
        value = getattr(io, attr, None) if io is not None else None
        writes.append(CgroupWrite(resource, rel_dir, f"{device} {value or 0}", reason))
    weight = io.io_weight_percent if io is not None and io.io_weight_percent is not None else DEFAULT_IO_WEIGHT_PERCENT
    writes.append(CgroupWrite(WEIGHT, rel_dir, f"{device} {weight}", reason))
    return writes


class BlkioPlanner:
    """Plans the besteffort dir's block IO writes from ``beClass.blkioQOS``; logs unsupported settings once.

    Args:
        sys_root: the sysfs mount, where block devices are resolved.
    """

    def __init__(self, sys_root: Path = Path("/sys")) -> None:
        self.sys_root = sys_root
        self._logged: set[str] = set()
        #: devices with values in each dir: read from the files the first time a dir is planned, then kept
        #: (devices configured since, minus those reset), so a reconcile does not re-read every dir's files
        self._devices: dict[str, set[str]] = {}

    def _once(self, message: str) -> None:
        if message not in self._logged:
            self._logged.add(message)
            log.warning("%s", message)

    def plan(self, layout: CgroupLayout, spec: NodeSLOSpec, pods: list[PodMeta] | None = None) -> list[CgroupWrite]:
        """Writes for the besteffort dir (on v1 also its pods' and containers' dirs, see the module docstring):
        configured devices, and resets of devices no longer configured."""
        strategy = spec.resource_qos_strategy
        if strategy is None:
            return []
        for name, cls in (("lsrClass", strategy.lsr_class), ("lsClass", strategy.ls_class)):
            cfg = cls.blkio_qos if cls is not None else None
            if cfg is not None and cfg.enable and cfg.blocks:
                self._once(f"BlkioReconcile: blkioQOS of {name} is not supported (upstream configures beClass only)")
        be = strategy.be_class.blkio_qos if strategy.be_class is not None else None
        blocks = (be.blocks or []) if be is not None and be.enable else []
        be_dir = layout.qos_dir("BestEffort")
        rel_dirs = [be_dir]
        if layout.version == CgroupVersion.V1:
            for pod in pods or []:
                if pod.cgroup_dir is None or not pod.cgroup_dir.startswith(be_dir + "/"):
                    continue
                rel_dirs.append(pod.cgroup_dir)
                for c in pod.containers:
                    if c.container_id:
                        try:
                            rel_dirs.append(layout.container_dir(pod.cgroup_dir, c.container_id))
                        except CgroupPathError:
                            continue
        wanted: dict[str, BlockCfg] = {}
        for block in blocks:
            kind = block.block_type or ""
            if kind != "device":
                self._once(f"BlkioReconcile: block {block.name!r} of type {kind!r} skipped (only 'device' is resolved)")
                continue
            try:
                wanted[device_number(block.name or "", self.sys_root)] = block
            except BlockDeviceError as exc:
                self._once(f"BlkioReconcile: {exc}; skipped")
        writes: list[CgroupWrite] = []
        known = {d: self._devices[d] if d in self._devices else configured_devices(layout, d) for d in rel_dirs}
        for rel_dir in rel_dirs:
            for device, block in wanted.items():
                writes += block_writes(rel_dir, device, block)
            for device in sorted(known[rel_dir] - set(wanted)):
                writes += block_writes(rel_dir, device, None)
        self._devices = {d: set(wanted) for d in rel_dirs}
        return writes
