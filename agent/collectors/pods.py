"""Per-pod and per-container usage from the cgroup files, and the BE totals.

Follows upstream ``metricsadvisor/collectors/podresource`` (cpu from cumulative cpu time deltas,
memory without page cache) and ``beresource`` (BE cpu usage of the besteffort QoS dir, BE request,
BE real limit = min(cpuset size, cfs quota) in milli-cores).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from agent.cgroups import (
    CFS_PERIOD_US,
    CgroupLayout,
    CgroupPathError,
    CgroupStatReader,
    OpenFiles,
    read_cfs_quota,
    read_cpuset,
)
from agent.states.pods import PodMeta, batch_cpu_request
from app.api.koordext import QoSClass

log = logging.getLogger("agent.collectors")


@dataclass(slots=True)
class Usage:
    """CPU in cores (None until two samples exist) and memory working set in bytes."""

    cpu: float | None
    memory: int


@dataclass(slots=True)
class PodSample:
    """One collection round: pod usage by uid, container usage by ``(uid, container name)``."""

    pods: dict[str, Usage] = field(default_factory=dict)
    containers: dict[tuple[str, str], Usage] = field(default_factory=dict)


class CgroupUsageReader:
    """CPU rate of a cgroup from consecutive cumulative readings (remembers the previous one per dir).

    Files are read through kept descriptors (:class:`agent.cgroups.OpenFiles`), paths computed once per dir.
    """

    def __init__(self, layout: CgroupLayout, files: OpenFiles | None = None) -> None:
        self.layout = layout
        self.stats = CgroupStatReader(layout, files)
        self._last: dict[str, tuple[float, int]] = {}

    def read(self, rel_dir: str, now: float) -> Usage:
        """Usage of ``rel_dir`` at ``now`` (epoch seconds): cpu in cores, memory in bytes.

        Raises:
            OSError: the cgroup is missing.
        """
        ns = self.stats.cpu_ns(rel_dir)
        memory = self.stats.memory(rel_dir)
        prev = self._last.get(rel_dir)
        self._last[rel_dir] = (now, ns)
        cpu = None
        if prev is not None and now > prev[0] and ns >= prev[1]:
            cpu = (ns - prev[1]) / 1e9 / (now - prev[0])
        return Usage(cpu=cpu, memory=memory)

    def read_cpu(self, rel_dir: str, now: float) -> float | None:
        """CPU cores of ``rel_dir`` only (None on the first reading).

        Raises:
            OSError: the cgroup is missing.
        """
        ns = self.stats.cpu_ns(rel_dir)
        key = "cpu:" + rel_dir
        prev = self._last.get(key)
        self._last[key] = (now, ns)
        if prev is not None and now > prev[0] and ns >= prev[1]:
            return (ns - prev[1]) / 1e9 / (now - prev[0])
        return None

    def retain(self, rel_dirs: set[str]) -> None:
        """Forget previous readings (and close the files) of dirs no longer present."""
        for key in [k for k in self._last if k.removeprefix("cpu:") not in rel_dirs]:
            del self._last[key]
        self.stats.retain(rel_dirs)


class PodCollector:
    """Reads every pod's (and its containers') cgroup once per round."""

    def __init__(self, layout: CgroupLayout, files: OpenFiles | None = None) -> None:
        self.layout = layout
        self.reader = CgroupUsageReader(layout, files)
        self._missing: set[str] = set()
        self._container_dirs: dict[tuple[str, str], str | None] = {}
        self._seen: frozenset[str] = frozenset()

    def _container_dir(self, pod_dir: str, container_id: str) -> str | None:
        key = (pod_dir, container_id)
        try:
            return self._container_dirs[key]
        except KeyError:
            pass
        try:
            found: str | None = self.layout.container_dir(pod_dir, container_id)
        except CgroupPathError:
            found = None
        self._container_dirs[key] = found
        return found

    def collect(self, pods: list[PodMeta], now: float) -> PodSample:
        """Usage of each pod with a cgroup; missing cgroups are skipped with one log line each."""
        sample = PodSample()
        seen: set[str] = set()
        read = self.reader.read
        for pod in pods:
            pod_dir = pod.cgroup_dir
            if pod_dir is None:
                continue
            seen.add(pod_dir)
            try:
                sample.pods[pod.uid] = read(pod_dir, now)
            except (OSError, ValueError, CgroupPathError) as exc:
                if pod_dir not in self._missing:
                    self._missing.add(pod_dir)
                    log.info("pod %s: cgroup %s not readable, skipped: %s", pod.key, pod_dir, exc)
                continue
            self._missing.discard(pod_dir)
            for c in pod.containers:
                if not c.container_id:
                    continue
                cdir = self._container_dir(pod_dir, c.container_id)
                if cdir is None:
                    continue
                seen.add(cdir)
                try:
                    sample.containers[(pod.uid, c.name)] = read(cdir, now)
                except (OSError, ValueError, CgroupPathError):
                    continue
        seen.add(self.layout.qos_dir("BestEffort"))
        if seen != self._seen:
            self._seen = frozenset(seen)
            self.reader.retain(seen)
            self._container_dirs = {k: v for k, v in self._container_dirs.items() if k[0] in seen}
        return sample


@dataclass(slots=True)
class BESample:
    """BE cpu in milli-cores: usage of the besteffort dir (None on the first round), Σ batch-cpu requests
    of BE pods, and the real limit min(cpuset cpus * 1000, quota * 1000 / period)."""

    usage: float | None
    request: int
    real_limit: int


def collect_be(layout: CgroupLayout, reader: CgroupUsageReader, pods: list[PodMeta], now: float) -> BESample:
    """The BE totals (``beResourceCollector``).

    Raises:
        OSError: the besteffort cgroup is missing.
    """
    be_dir = layout.qos_dir("BestEffort")
    cores = reader.read_cpu(be_dir, now)
    request = sum(batch_cpu_request(p) for p in pods if p.qos_raw == QoSClass.BE)
    limit = len(read_cpuset(layout, be_dir)) * 1000
    quota, period = read_cfs_quota(layout, be_dir)
    if quota != -1:
        limit = min(limit, quota * 1000 // (period or CFS_PERIOD_US))
    return BESample(usage=None if cores is None else cores * 1000, request=request, real_limit=limit)
