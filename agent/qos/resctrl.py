"""LLC (CAT) and memory bandwidth (MBA) per QoS class through resctrl.

Follows upstream ``pkg/koordlet/qosmanager/plugins/resctrl/resctrl_reconcile.go`` and the resctrl helpers of
``pkg/koordlet/util/system/resctrl.go``:

- Three groups of upstream's names under the resctrl mount: ``LSR`` (LSE and LSR pods), ``LS`` and ``BE``
  (``getPodResctrlGroup``); other pods stay where they are.
- ``schemata`` per group from the class's ``resctrlQOS`` (a disabled class gets upstream's ``NoneResctrlQOS``:
  0-100 % of the cache, 100 % bandwidth): ``L3:<id>=<mask>;...`` with the contiguous way mask
  ``(1 << ceil(ways * end / 100)) - (1 << ceil(ways * start / 100))`` (``CalculateCatL3MaskValue``), ways =
  bit length of ``info/L3/cbm_mask``, one entry per cache id of the root ``schemata``; a mask narrower than
  ``info/L3/min_cbm_bits`` is widened (upwards, then downwards) to that many ways, since the kernel refuses it.
  ``MB:<id>=<percent>;...`` from ``mbaPercent`` rounded up to ``info/MB/bandwidth_gran`` (upstream rounds to
  10, Intel's granularity) and at least ``info/MB/min_bandwidth``; on AMD the value is upstream's MB/s
  figure (``2048`` unlimited, else ``25 * 8 * 0.8 * percent / 100``).
- ``tasks``: every thread of each pod's containers (``tasks`` of the cpu cgroup on v1, ``cgroup.threads`` on v2)
  that is not in its group yet is written to the group's ``tasks``, every round, so new processes follow.

Support (:func:`detect`): the resctrl fs mounted (its ``info`` dir present) and ``/proc/cpuinfo`` flags
``cat_l3`` (CAT) / ``mba`` (MBA). The agent does not mount resctrl itself.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

from agent.cgroups import CgroupLayout, CgroupPathError, CgroupVersion, read_text
from agent.hostfiles import HostWrite, parse_schemata_line
from agent.states.nodeslo import class_qos
from agent.states.pods import PodMeta
from app.api.koordext import QoSClass
from app.api.slo import NodeSLOSpec, ResctrlQOSCfg

log = logging.getLogger("agent.qos.resctrl")

#: Upstream's group names, in reconcile order.
GROUPS = ("LSR", "LS", "BE")
#: AMD: upstream's "unlimited" MB value and the per-CCD maximum it scales, Gb/s.
AMD_UNLIMITED_MB = "2048"
AMD_CCD_MAX_MB_GBPS = 25 * 8 * 0.8
AMD_VENDOR_ID = "AuthenticAMD"


class ResctrlError(ValueError):
    """The resctrl layout cannot be used (no mount, malformed info files); the message says which file."""


@dataclass(frozen=True, slots=True)
class ResctrlInfo:
    """What the resctrl mount offers.

    Attributes:
        root: the resctrl mount (``/sys/fs/resctrl``).
        cat: L3 CAT usable (mounted, ``info/L3`` present and the cpu flag ``cat_l3``).
        mba: MBA usable (``info/MB`` present and the cpu flag ``mba``).
        cbm_mask: ``info/L3/cbm_mask`` as an int (all ways), 0 without CAT.
        min_cbm_bits: ``info/L3/min_cbm_bits`` (ways a mask needs at least).
        l3_ids: cache ids of the root ``schemata`` L3 line.
        mb_gran / mb_min: ``info/MB/bandwidth_gran`` and ``min_bandwidth``, percent.
        mb_ids: cache ids of the root ``schemata`` MB line.
        amd: the cpu vendor is AMD (MB values in upstream's MB/s units).
    """

    root: Path
    cat: bool
    mba: bool
    cbm_mask: int = 0
    min_cbm_bits: int = 1
    l3_ids: tuple[int, ...] = ()
    mb_gran: int = 10
    mb_min: int = 10
    mb_ids: tuple[int, ...] = ()
    amd: bool = False


def cpu_flags(proc: Path) -> tuple[set[str], str]:
    """``(flags of the first cpu, vendor_id)`` from ``<proc>/cpuinfo``; empty when unreadable."""
    flags: set[str] = set()
    vendor = ""
    try:
        with open(proc / "cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "vendor_id" and not vendor:
                    vendor = value.strip()
                elif key == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass
    return flags, vendor


def _read_int(path: Path, base: int = 10) -> int:
    try:
        return int(read_text(path), base)
    except (OSError, ValueError) as exc:
        raise ResctrlError(f"cannot read {path}: {exc}") from None


def detect(root: Path, proc: Path) -> tuple[ResctrlInfo | None, str]:
    """Probe resctrl: ``(info, "")`` when CAT or MBA can be used, else ``(None, why not)``.

    Raises nothing: a malformed info file is reported in the reason.
    """
    flags, vendor = cpu_flags(proc)
    want_cat, want_mba = "cat_l3" in flags, "mba" in flags
    if not (root / "info").is_dir():
        missing = [f for f in ("cat_l3", "mba") if f not in flags]
        why = f"resctrl is not mounted at {root}"
        if missing:
            why += f" and /proc/cpuinfo lacks {' and '.join(missing)} (no Intel RDT / AMD PQoS)"
        return None, why
    try:
        schemata = read_text(root / "schemata")
    except OSError as exc:
        return None, f"cannot read {root / 'schemata'}: {exc}"
    ids: dict[str, tuple[int, ...]] = {}
    for line in schemata.splitlines():
        try:
            kind, domains = parse_schemata_line(line)
        except ValueError:
            continue
        ids[kind] = tuple(sorted(domains))
    cat = want_cat and (root / "info" / "L3").is_dir() and bool(ids.get("L3"))
    mba = want_mba and (root / "info" / "MB").is_dir() and bool(ids.get("MB"))
    if not (cat or mba):
        have = sorted(flags & {"cat_l3", "mba"})
        return None, f"resctrl at {root} offers neither L3 CAT nor MBA usable with cpu flags {have}"
    try:
        info = ResctrlInfo(
            root=root,
            cat=cat,
            mba=mba,
            cbm_mask=_read_int(root / "info" / "L3" / "cbm_mask", 16) if cat else 0,
            min_cbm_bits=_read_int(root / "info" / "L3" / "min_cbm_bits") if cat else 1,
            l3_ids=ids.get("L3", ()) if cat else (),
            mb_gran=_read_int(root / "info" / "MB" / "bandwidth_gran") if mba else 10,
            mb_min=_read_int(root / "info" / "MB" / "min_bandwidth") if mba else 10,
            mb_ids=ids.get("MB", ()) if mba else (),
            amd=vendor == AMD_VENDOR_ID,
        )
    except ResctrlError as exc:
        return None, str(exc)
    if cat and (info.cbm_mask <= 0 or (info.cbm_mask + 1) & info.cbm_mask):
        return None, f"{root}/info/L3/cbm_mask {info.cbm_mask:x} is not a contiguous mask from bit 0"
    return info, ""


def l3_mask(cbm_mask: int, start_percent: int, end_percent: int, min_bits: int = 1) -> int:
    """The contiguous way mask of ``[start, end)`` percent of the ways of ``cbm_mask``, at least ``min_bits`` wide.

    ``cbm_mask`` 0x7ff (11 ways): 0-30 % -> 0xf, 10-50 % -> 0x3c, 0-100 % -> 0x7ff (upstream's examples).

    Raises:
        ValueError: ``cbm_mask`` is not all ones from bit 0, or not ``0 <= start < end <= 100``.
    """
    if cbm_mask <= 0 or (cbm_mask + 1) & cbm_mask:
        raise ValueError(f"illegal cbm {cbm_mask:x}")
    if start_percent < 0 or end_percent > 100 or end_percent <= start_percent:
        raise ValueError(f"illegal l3 cat percent: start {start_percent}, end {end_percent}")
    ways = cbm_mask.bit_length()
    start = math.ceil(ways * start_percent / 100)
    end = math.ceil(ways * end_percent / 100)
    need = min(max(min_bits, 1), ways)
    if end - start < need:
        end = min(start + need, ways)
        start = end - need
    return (1 << end) - (1 << start)


def mb_value(percent: int, info: ResctrlInfo) -> str:
    """The MB schemata value of ``mbaPercent`` (1..100): rounded up to the granularity, at least the minimum;
    AMD: upstream's MB/s value.

    Raises:
        ValueError: the percent is outside 1..100 (upstream leaves MB unchanged then).
    """
    if not 0 < percent <= 100:
        raise ValueError(f"mbaPercent {percent} is not in [1, 100]")
    if info.amd:
        return AMD_UNLIMITED_MB if percent == 100 else str(int(AMD_CCD_MAX_MB_GBPS * percent / 100))
    gran = max(info.mb_gran, 1)
    value = -(-percent // gran) * gran
    return str(min(max(value, info.mb_min), 100))


def group_of(pod: PodMeta) -> str | None:
    """The resctrl group of a pod's QoS class (LSE and LSR -> ``LSR``, LS, BE); None for other classes."""
    return {QoSClass.LSE: "LSR", QoSClass.LSR: "LSR", QoSClass.LS: "LS", QoSClass.BE: "BE"}.get(pod.qos)


def _class_cfg(spec: NodeSLOSpec, group: str) -> tuple[int, int, int]:
    """``(catRangeStartPercent, catRangeEndPercent, mbaPercent)`` of the group's class; a disabled class gets
    upstream's ``NoneResctrlQOS`` (0, 100, 100)."""
    cfg = class_qos(spec, group).resctrl_qos or ResctrlQOSCfg()
    if not cfg.enable:
        return 0, 100, 100
    start = cfg.cat_range_start_percent if cfg.cat_range_start_percent is not None else 0
    end = cfg.cat_range_end_percent if cfg.cat_range_end_percent is not None else 100
    mba = cfg.mba_percent if cfg.mba_percent is not None else 100
    return start, end, mba


def schemata_writes(spec: NodeSLOSpec, info: ResctrlInfo) -> list[HostWrite]:
    """The ``schemata`` lines of the three groups (L3 when CAT is usable, MB when MBA is).

    A class whose values cannot be turned into a line (an MB percent of 0) is logged and left unchanged, as
    upstream does; the NodeSLO intake has already refused out-of-range values.
    """
    writes: list[HostWrite] = []
    for group in GROUPS:
        start, end, mba = _class_cfg(spec, group)
        path = info.root / group / "schemata"
        if info.cat:
            try:
                mask = l3_mask(info.cbm_mask, start, end, info.min_cbm_bits)
            except ValueError as exc:
                log.warning("resctrl group %s: L3 left unchanged: %s", group, exc)
            else:
                line = "L3:" + ";".join(f"{i}={mask:x}" for i in info.l3_ids)
                writes.append(HostWrite(path, line, "ResctrlReconcile"))
        if info.mba:
            try:
                value = mb_value(mba, info)
            except ValueError as exc:
                log.warning("resctrl group %s: MB left unchanged: %s", group, exc)
            else:
                line = "MB:" + ";".join(f"{i}={value}" for i in info.mb_ids)
                writes.append(HostWrite(path, line, "ResctrlReconcile"))
    return writes


def _read_ids(path: Path) -> set[int]:
    """Thread ids listed one per line in ``path``; empty when unreadable (the cgroup went away)."""
    try:
        with open(path, "rb") as f:
            return {int(x) for x in f.read().split()}
    except (OSError, ValueError):
        return set()


def pod_task_ids(layout: CgroupLayout, pod: PodMeta) -> set[int]:
    """Thread ids of a pod: its dir's and each container dir's (``tasks`` on v1 cpu, ``cgroup.threads`` on v2)."""
    if pod.cgroup_dir is None:
        return set()
    name = "tasks" if layout.version == CgroupVersion.V1 else "cgroup.threads"
    try:
        pod_path = layout.dir_path("cpu", pod.cgroup_dir)
    except CgroupPathError:
        return set()
    ids = _read_ids(pod_path / name)
    dirs: list[str] = []
    for c in pod.containers:
        if c.container_id:
            try:
                dirs.append(str(layout.dir_path("cpu", layout.container_dir(pod.cgroup_dir, c.container_id))))
            except CgroupPathError:
                continue
    if not dirs:
        try:
            with os.scandir(pod_path) as it:
                dirs = [e.path for e in it if e.is_dir(follow_symlinks=False)]
        except OSError:
            dirs = []
    for d in dirs:
        ids |= _read_ids(Path(d) / name)
    return ids


def task_writes(layout: CgroupLayout, pods: list[PodMeta], info: ResctrlInfo) -> list[HostWrite]:
    """One ``tasks`` write per thread of an active pod not yet in its class's group (upstream only appends the
    ids found in the cgroups but not in the group, and never caches them)."""
    in_group = {g: _read_ids(info.root / g / "tasks") for g in GROUPS}
    writes: list[HostWrite] = []
    for pod in pods:
        group = group_of(pod)
        if group is None or not pod.active:
            continue
        path = info.root / group / "tasks"
        for tid in sorted(pod_task_ids(layout, pod) - in_group[group]):
            writes.append(HostWrite(path, str(tid), f"ResctrlReconcile {pod.key}"))
    return writes
