"""The resource executor: the only code that writes cgroup files.

Follows upstream ``pkg/koordlet/resourceexecutor`` (``executor.go``, ``updater.go``): strategies
hand it :class:`CgroupWrite` values in upstream's v1 terms; the executor maps them to the
file of this node's cgroup version, validates bounds, skips values that are already in place
(a write is remembered for ``cache_ttl`` seconds, then the file is read again), logs
``old -> new`` and, in dry-run, only plans.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agent.cgroups import (
    RESOURCES,
    V1_MEMORY_UNLIMITED,
    CgroupLayout,
    CgroupPathError,
    CgroupVersion,
    format_cpuset,
    parse_cpuset,
    read_text,
    shares_to_weight,
)

log = logging.getLogger("agent.executor")


class WriteRecorder(Protocol):
    """Where the executor counts its outcomes (the Prometheus metrics)."""

    def cgroup_write(self, resource: str, result: str) -> None:
        """Count one write attempt of ``resource`` ended with ``result``."""


@dataclass(frozen=True, slots=True)
class CgroupWrite:
    """A wanted cgroup value.

    Attributes:
        resource: upstream resource name = v1 file name (``cpu.cfs_quota_us``).
        rel_dir: cgroup dir relative to the mount root (``kubepods/besteffort``).
        value: the v1-form value (``"-1"`` = unlimited for quota / memory limits; cpusets as ``"0-3"``).
        reason: why (logged), e.g. ``AdjustBEByNodeCPUUsage``.
    """

    resource: str
    rel_dir: str
    value: str
    reason: str = ""


class InvalidWrite(ValueError):
    """A write names an unknown resource, a dir outside kubepods, or a value out of bounds."""


def _normalise(resource: str, value: str) -> str:
    """The canonical v1 form of ``value`` for comparisons (cpusets sorted, unlimited as ``-1``).

    Raises:
        InvalidWrite: the value does not parse or is out of bounds.
    """
    res = RESOURCES.get(resource)
    if res is None:
        raise InvalidWrite(f"unknown cgroup resource {resource!r}")
    text = value.strip()
    if resource == "cpuset.cpus":
        try:
            cpus = parse_cpuset(text)
        except ValueError as exc:
            raise InvalidWrite(f"{resource}: invalid cpu list {value!r}: {exc}") from None
        if not cpus:
            raise InvalidWrite(f"{resource}: empty cpu list")
        return format_cpuset(cpus)
    if res.allow_unlimited and text in ("max", "-1"):
        return "-1"
    try:
        number = int(text)
    except ValueError:
        raise InvalidWrite(f"{resource}: {value!r} is not an integer") from None
    if res.allow_unlimited and resource.startswith("memory.") and number >= V1_MEMORY_UNLIMITED:
        return "-1"
    if (res.minimum is not None and number < res.minimum) or (res.maximum is not None and number > res.maximum):
        raise InvalidWrite(f"{resource}: {number} is outside [{res.minimum}, {res.maximum}]")
    return str(number)


def _to_file(layout: CgroupLayout, resource: str, canonical: str) -> str:
    """What to write into the file of this cgroup version for the canonical v1 value."""
    if layout.version == CgroupVersion.V1:
        return canonical
    if resource == "cpu.shares":
        return str(shares_to_weight(int(canonical)))
    if canonical == "-1":
        return "max"
    return canonical


def _from_file(layout: CgroupLayout, resource: str, text: str) -> str:
    """The canonical v1 value of a file's content (best effort; unparsable content compares unequal)."""
    if layout.version == CgroupVersion.V2:
        if resource == "cpu.cfs_quota_us":
            text = text.split(" ", 1)[0]
        if resource == "cpu.shares":
            return f"weight:{text}"
    try:
        return _normalise(resource, text)
    except InvalidWrite:
        return f"raw:{text}"


class CgroupExecutor:
    """Validates, de-duplicates, logs and performs cgroup writes.

    Args:
        layout: the node's cgroup layout.
        dry_run: plan and log every write, change nothing (:attr:`planned` keeps them).
        recorder: counts outcomes (``written``, ``unchanged``, ``dry_run``, ``invalid``, ``missing``, ``error``).
        cache_ttl: seconds a written value is trusted before the file is read again.
    """

    def __init__(
        self,
        layout: CgroupLayout,
        *,
        dry_run: bool = False,
        recorder: WriteRecorder | None = None,
        cache_ttl: float = 60.0,
    ) -> None:
        self.layout = layout
        self.dry_run = dry_run
        self.recorder = recorder
        self.cache_ttl = cache_ttl
        self.planned: list[CgroupWrite] = []
        self._cache: dict[Path, tuple[str, float]] = {}
        self._missing_logged: set[Path] = set()

    def _count(self, resource: str, result: str) -> None:
        if self.recorder is not None:
            self.recorder.cgroup_write(resource, result)

    def update(self, write: CgroupWrite) -> bool:
        """Apply one write; True when the file was (or, in dry-run, would be) changed.

        Invalid writes, dirs outside kubepods and missing files are refused with a log line
        and counted, never raised: a bad input must not stop the loop or reach the kernel.
        """
        try:
            canonical = _normalise(write.resource, write.value)
            path = self.layout.file_path(write.resource, write.rel_dir)
        except (InvalidWrite, CgroupPathError) as exc:
            log.warning("refusing cgroup write %s=%r in %s: %s", write.resource, write.value, write.rel_dir, exc)
            self._count(write.resource, "invalid")
            return False
        if path is None:
            self._log_missing(Path(write.rel_dir) / write.resource, f"{write.resource} has no cgroup v2 counterpart")
            self._count(write.resource, "missing")
            return False
        wanted_text = _to_file(self.layout, write.resource, canonical)
        now = time.monotonic()
        cached = self._cache.get(path)
        if cached is not None and cached[0] == wanted_text and now - cached[1] < self.cache_ttl:
            self._count(write.resource, "unchanged")
            return False
        try:
            current_text = read_text(path)
        except OSError:
            self._log_missing(path, "cgroup file is missing (kernel or cgroup does not offer it)")
            self._count(write.resource, "missing")
            return False
        if self.layout.version == CgroupVersion.V1 and write.resource == "cpu.cfs_quota_us":
            canonical = self._fit_quota(path, canonical, write.reason)
            wanted_text = canonical
        current = _from_file(self.layout, write.resource, current_text)
        wanted = (
            f"weight:{wanted_text}"
            if self.layout.version == CgroupVersion.V2 and write.resource == "cpu.shares"
            else canonical
        )
        if current == wanted:
            self._cache[path] = (wanted_text, now)
            self._count(write.resource, "unchanged")
            return False
        if self.dry_run:
            log.info("dry-run: would write %s: %s -> %s (%s)", path, current_text, wanted_text, write.reason)
            self.planned.append(write)
            self._count(write.resource, "dry_run")
            return True
        try:
            with open(path, "w") as f:
                f.write(wanted_text)
        except OSError as exc:
            log.warning("cgroup write %s: %s -> %s failed: %s", path, current_text, wanted_text, exc)
            self._cache.pop(path, None)
            self._count(write.resource, "error")
            return False
        log.info("cgroup %s: %s -> %s (%s)", path, current_text, wanted_text, write.reason)
        self._cache[path] = (wanted_text, now)
        self._count(write.resource, "written")
        return True

    def _fit_quota(self, path: Path, canonical: str, reason: str) -> str:
        """cgroup v1 refuses a cfs quota above the parent's or below a child's (EINVAL): clamp the new value
        to the parent's quota, and first lower children (and grandchildren, bottom-up) that exceed it."""
        quota = int(canonical)
        try:
            parent = int(read_text(path.parent.parent / path.name))
        except (OSError, ValueError):
            parent = -1
        if parent != -1 and (quota == -1 or quota > parent) and quota != -1:
            log.info("%s: %d clamped to the parent's quota %d", path, quota, parent)
            quota = parent
        if quota == -1:
            return canonical if parent == -1 or canonical == "-1" else str(quota)
        children = [d for d in path.parent.iterdir() if d.is_dir()]
        grandchildren = [g for d in children for g in d.iterdir() if g.is_dir()]
        for d in [*grandchildren, *children]:
            f = d / path.name
            try:
                cur = int(read_text(f))
                if cur == -1 or cur <= quota:
                    continue
                if self.dry_run:
                    log.info("dry-run: would write %s: %d -> %d (%s)", f, cur, quota, reason)
                    continue
                with open(f, "w") as fh:
                    fh.write(str(quota))
                self._cache.pop(f, None)
                log.info("cgroup %s: %d -> %d (below the parent's new quota)", f, cur, quota)
            except (OSError, ValueError):
                continue
        return str(quota)

    def update_batch(self, writes: Iterable[CgroupWrite]) -> int:
        """Apply writes in order (callers order cpuset writes top-down / bottom-up); return how many changed."""
        return sum(1 for w in writes if self.update(w))

    def forget(self, rel_dir_prefix: str) -> None:
        """Drop cached values under a dir (a pod went away)."""
        for path in [p for p in self._cache if rel_dir_prefix in str(p)]:
            del self._cache[path]

    def _log_missing(self, path: Path, why: str) -> None:
        if path not in self._missing_logged:
            self._missing_logged.add(path)
            log.info("skipping %s: %s", path, why)
