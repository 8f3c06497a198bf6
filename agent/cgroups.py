"""Where the kubelet lays out pod cgroups, and the cgroup files the agent reads and writes, on v1 and v2.

Follows upstream ``pkg/koordlet/util/system/cgroup_resource.go`` (resource table, v1 -> v2 names),
``cgroup_driver.go`` (cgroupfs / systemd naming) and ``pkg/koordlet/util/pod.go`` (QoS and pod dirs).

Relative cgroup dirs (``kubepods/besteffort/pod<uid>``) are the currency of the agent: a
:class:`CgroupLayout` turns one into a file path for a resource, choosing the controller
mount on v1 (``<root>/<controller>/<dir>/<file>``) or the single hierarchy on v2
(``<root>/<dir>/<file>``, v2 file name). Every relative dir is checked to stay under the
kubepods root: a pod uid or container id that would escape it raises :class:`CgroupPathError`.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from app.api.topology import format_cpuset as format_cpuset  # the kernel's list format, shared with the scheduler

#: Default CFS period (microseconds), ``system.DefaultCPUCFSPeriod``.
CFS_PERIOD_US = 100_000
#: Bounds of ``cpu.shares`` (v1), ``util/system/cgroup.go``.
MIN_CPU_SHARES, MAX_CPU_SHARES = 2, 262_144
#: "No limit" of ``memory.limit_in_bytes`` on v1 as the kernel prints it for 4 KiB pages.
V1_MEMORY_UNLIMITED = 9_223_372_036_854_771_712

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,252}$")


class CgroupPathError(ValueError):
    """A cgroup dir would leave the kubepods root or is not a plain name; the message names it."""


class CgroupVersion(StrEnum):
    """cgroup v1 (one hierarchy per controller) or v2 (unified)."""

    V1 = "v1"
    V2 = "v2"


class CgroupDriver(StrEnum):
    """The kubelet's cgroup driver: ``cgroupfs`` (``kubepods/burstable/pod<uid>``) or ``systemd`` (``*.slice``)."""

    CGROUPFS = "cgroupfs"
    SYSTEMD = "systemd"


@dataclass(frozen=True, slots=True)
class Resource:
    """One cgroup file the agent knows.

    Attributes:
        name: upstream's resource name = the v1 file name (``cpu.shares``).
        controller: v1 controller mount (``cpu``, ``cpuacct``, ``cpuset``, ``memory``).
        v2_name: the file on v2, None when v2 has no counterpart.
        minimum / maximum: inclusive integer bounds checked before a write (None = unbounded);
            ``-1`` is always accepted where ``allow_unlimited`` (quota / limit "no limit").
        device_key: set for per-device files (blkio): the value is ``"MAJ:MIN N"`` and each device is a line
            of the file; on v2 the key of ``io.max`` (``rbps``, ``wbps``, ``riops``, ``wiops``) or ``""`` for
            ``io.weight``. ``N`` 0 means "no limit" for the throttle files (v2 ``max``).
    """

    name: str
    controller: str
    v2_name: str | None
    minimum: int | None = None
    maximum: int | None = None
    allow_unlimited: bool = False
    device_key: str | None = None


#: The resources the agent writes or reads, keyed by upstream name.
RESOURCES: dict[str, Resource] = {
    r.name: r
    for r in (
        Resource("cpu.shares", "cpu", "cpu.weight", MIN_CPU_SHARES, MAX_CPU_SHARES),
        Resource("cpu.cfs_quota_us", "cpu", "cpu.max", 1000, None, allow_unlimited=True),
        Resource("cpu.cfs_period_us", "cpu", "cpu.max", 1000, 1_000_000),
        Resource("cpu.bvt_warp_ns", "cpu", "cpu.bvt_warp_ns", -1, 2),
        # upstream CPUBurstValidator: 0 .. 100 x 10 x 100000 us (v2 cpu.max.burst)
        Resource("cpu.cfs_burst_us", "cpu", "cpu.max.burst", 0, 100 * 10 * CFS_PERIOD_US),
        Resource("cpu.idle", "cpu", "cpu.idle", 0, 1),
        Resource("cpuset.cpus", "cpuset", "cpuset.cpus"),
        Resource("memory.limit_in_bytes", "memory", "memory.max", 0, None, allow_unlimited=True),
        Resource("memory.min", "memory", "memory.min", 0, None),
        Resource("memory.low", "memory", "memory.low", 0, None),
        Resource("memory.high", "memory", "memory.high", 0, None, allow_unlimited=True),
        # Anolis OS memory QoS (upstream cgroup_resource.go, same names on v2); written only where the kernel has them
        Resource("memory.wmark_ratio", "memory", "memory.wmark_ratio", 0, 100),
        Resource("memory.wmark_scale_factor", "memory", "memory.wmark_scale_factor", 1, 1000),
        Resource("memory.wmark_min_adj", "memory", "memory.wmark_min_adj", -25, 50),
        Resource("memory.priority", "memory", "memory.priority", 0, 12),
        Resource("memory.use_priority_oom", "memory", "memory.use_priority_oom", 0, 1),
        Resource("memory.oom.group", "memory", "memory.oom.group", 0, 1),
        # block IO (upstream BlkioTR*/TW*/IOWeight): bytes/s and io/s per device, 0 = no limit
        Resource("blkio.throttle.read_bps_device", "blkio", "io.max", 0, None, device_key="rbps"),
        Resource("blkio.throttle.write_bps_device", "blkio", "io.max", 0, None, device_key="wbps"),
        Resource("blkio.throttle.read_iops_device", "blkio", "io.max", 0, None, device_key="riops"),
        Resource("blkio.throttle.write_iops_device", "blkio", "io.max", 0, None, device_key="wiops"),
        # Anolis blk-iocost weight on v1, io.weight on v2; upstream writes ioWeightPercent (1..100)
        Resource("blkio.cost.weight", "blkio", "io.weight", 1, 10000, device_key=""),
        Resource("cpuacct.usage", "cpuacct", None),
        Resource("memory.stat", "memory", "memory.stat"),
        Resource("cpu.stat", "cpu", "cpu.stat"),
    )
}


def shares_to_weight(shares: int) -> int:
    """v1 ``cpu.shares`` -> v2 ``cpu.weight``: ``1 + (shares - 2) * 9999 / 262142`` (``ConvertCPUSharesToWeight``)."""
    return 1 + (shares - 2) * 9999 // 262142


def parse_cpuset(text: str) -> list[int]:
    """``"0-3,8"`` -> ``[0, 1, 2, 3, 8]`` (sorted, unique).

    Raises:
        ValueError: not a cpu list.
    """
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            a, b = int(lo), int(hi)
            if a < 0 or b < a:
                raise ValueError(f"invalid cpu range {part!r}")
            cpus.update(range(a, b + 1))
        else:
            n = int(part)
            if n < 0:
                raise ValueError(f"invalid cpu {part!r}")
            cpus.add(n)
    return sorted(cpus)


def check_name(value: str, what: str) -> str:
    """Return ``value`` if it is a plain cgroup name component (no ``/``, no ``..``).

    Raises:
        CgroupPathError: the value would escape its parent dir or holds odd characters.
    """
    if not _SAFE_NAME.match(value or "") or ".." in value:
        raise CgroupPathError(f"{what} {value!r} is not a valid cgroup name component")
    return value


def container_id_of(status_id: str) -> str:
    """``containerd://abc`` -> ``abc``; the runtime prefix is dropped and the id checked.

    Raises:
        CgroupPathError: the id is empty or not a plain name.
    """
    cid = status_id.split("://", 1)[1] if "://" in status_id else status_id
    return check_name(cid, "container id")


@dataclass(frozen=True, slots=True)
class CgroupLayout:
    """The node's cgroup layout.

    Attributes:
        root: cgroup mount root (``/sys/fs/cgroup``).
        kubepods: the kubepods parent relative to the root (``kubepods`` or ``kubepods.slice``,
            may be nested such as ``test/kubepods``).
        version: v1 or v2.
        driver: cgroupfs or systemd (systemd when ``kubepods`` ends with ``.slice``).
    """

    root: Path
    kubepods: str = "kubepods"
    version: CgroupVersion = CgroupVersion.V1
    driver: CgroupDriver = CgroupDriver.CGROUPFS

    @classmethod
    def detect(cls, root: str | Path = "/sys/fs/cgroup", kubepods: str = "kubepods") -> CgroupLayout:
        """Detect v1 (a ``cpu`` controller dir under root) or v2 (``cgroup.controllers`` at the root).

        Raises:
            CgroupPathError: ``kubepods`` is absolute or holds ``..``.
        """
        root = Path(root)
        parts = [p for p in kubepods.strip("/").split("/") if p]
        if kubepods.startswith("/") or not parts or any(p == ".." for p in parts):
            raise CgroupPathError(f"kubepods {kubepods!r} must be a relative cgroup dir without '..'")
        for p in parts:
            check_name(p, "kubepods component")
        version = (
            CgroupVersion.V2
            if (root / "cgroup.controllers").is_file() and not (root / "cpu").is_dir()
            else CgroupVersion.V1
        )
        driver = CgroupDriver.SYSTEMD if parts[-1].endswith(".slice") else CgroupDriver.CGROUPFS
        return cls(root=root, kubepods="/".join(parts), version=version, driver=driver)

    # -- dirs -------------------------------------------------------------------------------------
    @property
    def _slice_prefix(self) -> str:
        base = self.kubepods.rsplit("/", 1)[-1]
        return base[: -len(".slice")] if base.endswith(".slice") else base

    def qos_dir(self, kube_qos: str) -> str:
        """Relative dir of a Kubernetes QoS class: Guaranteed -> kubepods, Burstable/BestEffort below it."""
        if kube_qos == "Guaranteed":
            return self.kubepods
        sub = "burstable" if kube_qos == "Burstable" else "besteffort"
        if self.driver == CgroupDriver.SYSTEMD:
            return f"{self.kubepods}/{self._slice_prefix}-{sub}.slice"
        return f"{self.kubepods}/{sub}"

    def pod_dir(self, uid: str, kube_qos: str) -> str:
        """Relative dir of pod ``uid`` as the kubelet names it.

        Raises:
            CgroupPathError: the uid is not a plain name.
        """
        check_name(uid, "pod uid")
        if self.driver == CgroupDriver.SYSTEMD:
            qos = {"Guaranteed": "", "Burstable": "-burstable"}.get(kube_qos, "-besteffort")
            return f"{self.qos_dir(kube_qos)}/{self._slice_prefix}{qos}-pod{uid.replace('-', '_')}.slice"
        return f"{self.qos_dir(kube_qos)}/pod{uid}"

    def container_dir(self, pod_dir: str, container_id: str) -> str:
        """Relative dir of a container under its pod (``<id>`` or ``cri-containerd-<id>.scope`` on systemd).

        Raises:
            CgroupPathError: the id is not a plain name.
        """
        cid = container_id_of(container_id)
        if self.driver == CgroupDriver.SYSTEMD:
            runtime = container_id.split("://", 1)[0] if "://" in container_id else "containerd"
            prefix = {"containerd": "cri-containerd", "docker": "docker", "cri-o": "crio"}.get(runtime, runtime)
            return f"{pod_dir}/{prefix}-{cid}.scope"
        return f"{pod_dir}/{cid}"

    # -- files ------------------------------------------------------------------------------------
    def dir_path(self, controller: str, rel_dir: str) -> Path:
        """Absolute dir of ``rel_dir`` in ``controller`` (the controller is ignored on v2).

        Raises:
            CgroupPathError: ``rel_dir`` leaves the kubepods root.
        """
        norm = os.path.normpath(rel_dir.strip("/")) if rel_dir else ""
        if norm != self.kubepods and not norm.startswith(self.kubepods + "/"):
            raise CgroupPathError(f"cgroup dir {rel_dir!r} is outside {self.kubepods!r}")
        base = self.root if self.version == CgroupVersion.V2 else self.root / controller
        return base / norm

    def file_path(self, resource: str, rel_dir: str) -> Path | None:
        """Absolute path of ``resource`` (upstream name) in ``rel_dir``; None when this version lacks it.

        Raises:
            KeyError: unknown resource.
            CgroupPathError: ``rel_dir`` leaves the kubepods root.
        """
        res = RESOURCES[resource]
        name = res.name if self.version == CgroupVersion.V1 else res.v2_name
        if name is None:
            return None
        return self.dir_path(res.controller, rel_dir) / name

    def exists(self, rel_dir: str, controller: str = "cpu") -> bool:
        """Whether ``rel_dir`` exists (in ``controller`` on v1)."""
        try:
            return self.dir_path(controller, rel_dir).is_dir()
        except CgroupPathError:
            return False

    def subdirs(self, rel_dir: str, controller: str = "cpu") -> list[str]:
        """Relative child dirs of ``rel_dir`` (sorted); empty when it is missing."""
        try:
            path = self.dir_path(controller, rel_dir)
            return sorted(f"{rel_dir}/{e.name}" for e in os.scandir(path) if e.is_dir(follow_symlinks=False))
        except (CgroupPathError, OSError):
            return []


# -- readers -------------------------------------------------------------------------------------


def read_text(path: Path) -> str:
    """The stripped content of a cgroup/proc file. Raises OSError."""
    with open(path, "rb") as f:
        return f.read().decode().strip()


#: ``memory.stat`` keys summed into the working set (``total_*`` on v1), as upstream's ``MemoryUsageWithoutPageCache``.
_V1_MEM_KEYS = (b"total_inactive_anon", b"total_active_anon", b"total_unevictable")
_V2_MEM_KEYS = (b"inactive_anon", b"active_anon", b"unevictable")


def read_cfs_quota(layout: CgroupLayout, rel_dir: str) -> tuple[int, int]:
    """``(quota_us, period_us)`` of ``rel_dir``; quota -1 means unlimited.

    Raises:
        OSError: the cgroup or file is missing.
    """
    if layout.version == CgroupVersion.V1:
        d = layout.dir_path("cpu", rel_dir)
        return int(read_text(d / "cpu.cfs_quota_us")), int(read_text(d / "cpu.cfs_period_us"))
    quota, _, period = read_text(layout.dir_path("cpu", rel_dir) / "cpu.max").partition(" ")
    return (-1 if quota == "max" else int(quota)), int(period or CFS_PERIOD_US)


def read_cpuset(layout: CgroupLayout, rel_dir: str) -> list[int]:
    """The cpus of ``rel_dir`` (``cpuset.cpus``; v2 falls back to ``cpuset.cpus.effective``).

    Raises:
        OSError: the cgroup or file is missing.
    """
    d = layout.dir_path("cpuset", rel_dir)
    text = read_text(d / "cpuset.cpus")
    if not text and layout.version == CgroupVersion.V2:
        text = read_text(d / "cpuset.cpus.effective")
    return parse_cpuset(text)


class OpenFiles:
    """Files read every round, kept open and re-read with ``pread`` at offset 0.

    Opening a cgroup or proc file (path lookup in kernfs) costs several times more than reading it;
    a seq_file read at offset 0 regenerates the content, so a kept descriptor always yields fresh
    values. At most ``limit`` descriptors are kept (further files are opened per read); a read that
    fails on a kept descriptor (the cgroup was removed) closes it and retries once with a fresh open.

    Args:
        limit: most descriptors kept open (default: a quarter of the soft ``RLIMIT_NOFILE``, at most 4096).
    """

    def __init__(self, limit: int | None = None) -> None:
        if limit is None:
            try:
                import resource

                soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            except (ImportError, OSError, ValueError):
                soft = 1024
            limit = min(max(soft // 4, 64), 4096) if soft > 0 else 4096
        self.limit = limit
        self._fds: dict[str, int] = {}

    def read(self, path: str, size: int = 65536) -> bytes:
        """The content of ``path`` (at most ``size`` bytes).

        Raises:
            OSError: the file is missing or unreadable.
        """
        fd = self._fds.get(path)
        if fd is not None:
            try:
                return os.pread(fd, size, 0)
            except OSError:
                self._close(path)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.pread(fd, size, 0)
        except BaseException:
            os.close(fd)
            raise
        if len(self._fds) < self.limit:
            self._fds[path] = fd
        else:
            os.close(fd)
        return data

    def _close(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def retain(self, keep: Callable[[str], bool]) -> None:
        """Close the descriptors of paths for which ``keep(path)`` is False (pods that went away)."""
        for path in [p for p in self._fds if not keep(p)]:
            self._close(path)

    def close(self) -> None:
        """Close every kept descriptor."""
        for path in list(self._fds):
            self._close(path)

    def __len__(self) -> int:
        return len(self._fds)


def parse_memory_stat(data: bytes, keys: tuple[bytes, ...]) -> int:
    """Sum of ``keys`` in a ``memory.stat`` content, bytes (missing keys count 0).

    Raises:
        ValueError: a value is not an integer.
    """
    total = 0
    for key in keys:
        i = data.find(key)
        while i > 0 and data[i - 1] != 10:  # not at a line start: a longer name ends with this key
            i = data.find(key, i + 1)
        if i < 0:
            continue
        end = data.find(b"\n", i)
        total += int(data[i + len(key) : end if end >= 0 else None])
    return total


class CgroupStatReader:
    """Reads cpu time and memory working set of cgroup dirs through :class:`OpenFiles`, with the absolute
    paths of each dir computed (and checked to stay under kubepods) once.

    Args:
        layout: the node's cgroup layout.
        files: the descriptor cache (a new one by default).
    """

    def __init__(self, layout: CgroupLayout, files: OpenFiles | None = None) -> None:
        self.layout = layout
        self.files = files or OpenFiles()
        self._paths: dict[str, tuple[str, str]] = {}
        v1 = layout.version == CgroupVersion.V1
        self._mem_keys = tuple(k + b" " for k in (_V1_MEM_KEYS if v1 else _V2_MEM_KEYS))

    def paths(self, rel_dir: str) -> tuple[str, str]:
        """``(cpu usage file, memory.stat)`` of ``rel_dir``.

        Raises:
            CgroupPathError: ``rel_dir`` leaves the kubepods root.
        """
        found = self._paths.get(rel_dir)
        if found is None:
            if self.layout.version == CgroupVersion.V1:
                cpu = str(self.layout.dir_path("cpuacct", rel_dir) / "cpuacct.usage")
            else:
                cpu = str(self.layout.dir_path("cpu", rel_dir) / "cpu.stat")
            found = self._paths[rel_dir] = (cpu, str(self.layout.dir_path("memory", rel_dir) / "memory.stat"))
        return found

    def cpu_ns(self, rel_dir: str) -> int:
        """Cumulative CPU time of ``rel_dir``, nanoseconds: v1 ``cpuacct.usage``, v2 ``cpu.stat`` usage_usec * 1000.

        Raises:
            OSError: the cgroup or file is missing. CgroupPathError: the dir leaves kubepods.
        """
        data = self.files.read(self.paths(rel_dir)[0])
        if self.layout.version == CgroupVersion.V1:
            return int(data)
        for line in data.splitlines():
            if line.startswith(b"usage_usec "):
                return int(line.split()[1]) * 1000
        raise OSError(f"no usage_usec in {rel_dir}/cpu.stat")

    def memory(self, rel_dir: str) -> int:
        """Memory of ``rel_dir`` without page cache, bytes: inactive_anon + active_anon + unevictable of
        ``memory.stat`` (``total_*`` on v1).

        Raises:
            OSError: the cgroup or file is missing. CgroupPathError: the dir leaves kubepods.
        """
        return parse_memory_stat(self.files.read(self.paths(rel_dir)[1]), self._mem_keys)

    def retain(self, rel_dirs: set[str]) -> None:
        """Forget paths and close descriptors of dirs not in ``rel_dirs``."""
        gone = [d for d in self._paths if d not in rel_dirs]
        if not gone:
            return
        dropped: set[str] = set()
        for d in gone:
            dropped.update(self._paths.pop(d))
        self.files.retain(lambda p: p not in dropped)
