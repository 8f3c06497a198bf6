"""The resource executor: the only code that writes cgroup files.

Follows upstream ``pkg/koordlet/resourceexecutor`` (``executor.go``, ``updater.go``): strategies
hand it :class:`CgroupWrite` values in upstream's v1 terms; the executor maps them to the
file of this node's cgroup version, validates bounds, skips values that are already in place
(a write is remembered for ``cache_ttl`` seconds, then the file is read again), logs
``old -> new`` and, in dry-run, only plans.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
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
from agent.hostfiles import HostRoots, HostWrite, InvalidHostWrite, check_host_value, schemata_has
from agent.validator import INT64_MAX, NodeBounds, OutOfBounds, check_cpuset, check_integer

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
        routine: one step of a continuous adjustment (BE suppression moves the besteffort quota every
            round while the load moves): written like any other but logged at DEBUG, the strategy
            logging its changes of regime at INFO instead. Not part of equality.
    """

    resource: str
    rel_dir: str
    value: str
    reason: str = ""
    routine: bool = field(default=False, compare=False)


class InvalidWrite(ValueError):
    """A write names an unknown resource, a dir outside kubepods, or a value out of bounds."""


def _normalise(resource: str, value: str, bounds: NodeBounds | None = None) -> str:
    """The canonical v1 form of ``value`` for comparisons (cpusets sorted, unlimited as ``-1``).

    ``bounds``: check the value against its range (:mod:`agent.validator`); None only parses (the
    content of a file already there is compared, never refused).

    Raises:
        InvalidWrite: unknown resource or a value that does not parse.
        OutOfBounds: (with ``bounds``) a well-formed value outside its range.
    """
    res = RESOURCES.get(resource)
    if res is None:
        raise InvalidWrite(f"unknown cgroup resource {resource!r}")
    text = value.strip()
    if res.device_key is not None:
        device, number = _split_device(resource, text)
        if bounds is not None:
            check_integer(resource, number, bounds)
        return f"{device} {number}"
    if resource == "cpuset.cpus":
        try:
            cpus = parse_cpuset(text)
        except ValueError as exc:
            raise InvalidWrite(f"{resource}: invalid cpu list {value!r}: {exc}") from None
        if bounds is not None:
            check_cpuset(resource, cpus, bounds)
        return format_cpuset(cpus)
    if res.allow_unlimited and text in ("max", "-1"):
        return "-1"
    try:
        number = int(text)
    except ValueError:
        raise InvalidWrite(f"{resource}: {value!r} is not an integer") from None
    if res.allow_unlimited and resource.startswith("memory.") and V1_MEMORY_UNLIMITED <= number <= INT64_MAX:
        return "-1"
    if bounds is not None:
        check_integer(resource, number, bounds)
    return str(number)


_DEVICE = re.compile(r"^(\d+):(\d+)$")


def _split_device(resource: str, text: str) -> tuple[str, int]:
    """``"8:16 1048576"`` -> ``("8:16", 1048576)`` for a per-device resource.

    Raises:
        InvalidWrite: not ``MAJ:MIN N`` with a non-negative integer N.
    """
    parts = text.split()
    if len(parts) != 2 or not _DEVICE.match(parts[0]):
        raise InvalidWrite(f"{resource}: {text!r} is not 'MAJOR:MINOR VALUE'")
    try:
        number = int(parts[1])
    except ValueError:
        raise InvalidWrite(f"{resource}: {parts[1]!r} is not an integer") from None
    return parts[0], number


def _device_of(resource: str, canonical: str) -> str | None:
    """The ``MAJ:MIN`` a canonical per-device value is for, None for other resources."""
    return canonical.split(" ", 1)[0] if RESOURCES[resource].device_key is not None else None


def _device_from_file(layout: CgroupLayout, resource: str, text: str, device: str) -> str:
    """The canonical ``"MAJ:MIN N"`` of ``device`` in a per-device file's content: v1 lines ``MAJ:MIN N``; v2
    ``io.max`` lines ``MAJ:MIN rbps=N wbps=max ...`` (``max`` = 0, no limit); ``io.weight`` lines ``MAJ:MIN N``.
    A device without a line has no limit (0) in the throttle files; its weight is unknown (compares unequal)."""
    key = RESOURCES[resource].device_key
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0] != device:
            continue
        if layout.version == CgroupVersion.V2 and key:
            for item in parts[1:]:
                name, _, val = item.partition("=")
                if name == key:
                    return f"{device} {0 if val == 'max' else val}"
            return f"{device} 0"
        return f"{device} {parts[1]}" if len(parts) > 1 else f"raw:{line}"
    return f"{device} 0" if key != "" else f"unset:{device}"


def _to_file(layout: CgroupLayout, resource: str, canonical: str) -> str:
    """What to write into the file of this cgroup version for the canonical v1 value."""
    if layout.version == CgroupVersion.V1:
        return canonical
    key = RESOURCES[resource].device_key
    if key:
        device, _, number = canonical.partition(" ")
        return f"{device} {key}={'max' if number == '0' else number}"
    if key is not None:
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
    except (InvalidWrite, OutOfBounds):
        return f"raw:{text}"


def _is_lower(new: str, old: str) -> bool:
    """Whether quota text ``new`` is a lower limit than ``old`` (``-1`` / ``max`` = unlimited)."""
    try:
        n, o = (-1 if t == "max" else int(t) for t in (new.split(" ", 1)[0], old.split(" ", 1)[0]))
    except ValueError:
        return False
    return n != -1 and (o == -1 or n < o)


def _subdirs(path: str) -> list[str]:
    """Child dirs of ``path`` (no symlinks followed); empty when unreadable."""
    try:
        with os.scandir(path) as it:
            return [e.path for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


@dataclass(frozen=True, slots=True)
class _Refused:
    """Why a write is refused: ``result`` (``invalid`` | ``out_of_bounds``), the message, the file when known."""

    result: str
    message: str
    path: Path | None


class CgroupExecutor:
    """Validates, de-duplicates, logs and performs cgroup writes.

    Args:
        layout: the node's cgroup layout.
        dry_run: plan and log every write, change nothing (:attr:`planned` keeps them).
        recorder: counts outcomes (``written``, ``unchanged``, ``dry_run``, ``invalid`` (does not parse, unknown
            resource, dir outside kubepods), ``out_of_bounds`` (well-formed but outside its range, see
            :mod:`agent.validator`), ``missing``, ``error``).
        cache_ttl: seconds a written value is trusted before the file is read again.
        bounds: the node-dependent bounds (cpu capacity, online cpus); :meth:`set_bounds` replaces them.
        host_roots: where node-wide writes (:meth:`update_host`: sysctls, memcg reaper, resctrl) may go.
    """

    def __init__(
        self,
        layout: CgroupLayout,
        *,
        dry_run: bool = False,
        recorder: WriteRecorder | None = None,
        cache_ttl: float = 60.0,
        bounds: NodeBounds | None = None,
        host_roots: HostRoots | None = None,
    ) -> None:
        self.layout = layout
        self.host_roots = host_roots or HostRoots()
        self.planned_host: list[HostWrite] = []
        self.dry_run = dry_run
        self.recorder = recorder
        self.cache_ttl = cache_ttl
        self.bounds = bounds or NodeBounds()
        self.planned: list[CgroupWrite] = []
        self._cache: dict[str, tuple[str, float]] = {}
        self._prepared: dict[tuple[str, str, str], tuple[Path | None, str, str] | _Refused] = {}
        #: (file, value) of refused writes already logged: a plan repeated every round logs once
        self._refused_logged: set[tuple[str, str]] = set()
        #: v1 quota writes held below their request by the parent's quota, by file: applied again when it rises
        self._clamped: dict[str, tuple[str, CgroupWrite]] = {}
        #: writes skipped so far because their cgroup dir did not exist (yet)
        self.missing_dirs = 0
        self._missing_logged: set[Path] = set()

    def _count(self, resource: str, result: str) -> None:
        if self.recorder is not None:
            self.recorder.cgroup_write(resource, result)

    def set_bounds(self, bounds: NodeBounds) -> None:
        """Replace the node-dependent bounds (the Node's capacity or the online cpus changed); writes
        checked against the old ones are checked again."""
        if bounds != self.bounds:
            log.info(
                "cgroup bounds: cfs quota <= %d us, cpusets within %s",
                bounds.max_cfs_quota,
                format_cpuset(sorted(bounds.online_cpus)) if bounds.online_cpus is not None else "any cpus",
            )
            self.bounds = bounds
            self._prepared.clear()
            self._refused_logged.clear()

    def _prepare(self, write: CgroupWrite) -> tuple[Path | None, str, str] | _Refused:
        """``(path, canonical v1 value, text for the file)`` of a write, or why it is refused (memoised)."""
        key = (write.resource, write.rel_dir, write.value)
        found = self._prepared.get(key)
        if found is not None:
            return found
        result: tuple[Path | None, str, str] | _Refused
        try:
            path = self.layout.file_path(write.resource, write.rel_dir)
        except (KeyError, CgroupPathError) as exc:
            message = f"unknown cgroup resource {write.resource!r}" if isinstance(exc, KeyError) else str(exc)
            result = _Refused("invalid", message, None)
        else:
            try:
                canonical = _normalise(write.resource, write.value, self.bounds)
                result = (path, canonical, _to_file(self.layout, write.resource, canonical))
            except InvalidWrite as exc:
                result = _Refused("invalid", str(exc), path)
            except OutOfBounds as exc:
                result = _Refused("out_of_bounds", str(exc), path)
        if len(self._prepared) >= 8192:
            self._prepared.clear()
        self._prepared[key] = result
        return result

    def _refuse(self, write: CgroupWrite, refused: _Refused) -> None:
        """Log a refused write (once per file and value) and count it."""
        where = str(refused.path) if refused.path is not None else f"{write.rel_dir}/{write.resource}"
        seen = (where, write.value)
        if seen not in self._refused_logged:
            if len(self._refused_logged) >= 4096:
                self._refused_logged.clear()
            self._refused_logged.add(seen)
            what = "out of bounds" if refused.result == "out_of_bounds" else "invalid"
            log.warning(
                "cgroup value %s, not written: %s = %r: %s (%s)",
                what,
                where,
                write.value,
                refused.message,
                write.reason or "no reason given",
            )
        self._count(write.resource, refused.result)

    def update(self, write: CgroupWrite, *, verify: bool = False) -> bool:
        """Apply one write; True when the file was (or, in dry-run, would be) changed.

        Invalid writes, dirs outside kubepods and missing files are refused with a log line
        and counted, never raised: a bad input must not stop the loop or reach the kernel.
        A value written or seen less than ``cache_ttl`` seconds ago is not read again unless ``verify``.
        """
        prepared = self._prepare(write)
        if isinstance(prepared, _Refused):
            self._refuse(write, prepared)
            return False
        path, canonical, wanted_text = prepared
        if path is None:
            self._log_missing(Path(write.rel_dir) / write.resource, f"{write.resource} has no cgroup v2 counterpart")
            self._count(write.resource, "missing")
            return False
        now = time.monotonic()
        device = _device_of(write.resource, canonical)
        spath = str(path) if device is None else f"{path}#{device}"
        cached = self._cache.get(spath)
        if not verify and cached is not None and cached[0] == wanted_text and now - cached[1] < self.cache_ttl:
            self._count(write.resource, "unchanged")
            return False
        try:
            current_text = read_text(path)
        except OSError:
            self._clamped.pop(spath, None)
            if not path.parent.is_dir():
                self.missing_dirs += 1
            self._log_missing(path, "cgroup file is missing (kernel or cgroup does not offer it)")
            self._count(write.resource, "missing")
            return False
        if self.layout.version == CgroupVersion.V1 and write.resource == "cpu.cfs_quota_us":
            try:
                own = int(current_text)
            except ValueError:
                own = None
            fitted = self._fit_quota(path, canonical, write.reason, own, routine=write.routine)
            if fitted != canonical:
                self._clamped[spath] = (os.path.dirname(os.path.dirname(spath)), write)
            else:
                self._clamped.pop(spath, None)
            canonical = wanted_text = fitted
        current = (
            _from_file(self.layout, write.resource, current_text)
            if device is None
            else _device_from_file(self.layout, write.resource, current_text, device)
        )
        wanted = (
            f"weight:{wanted_text}"
            if self.layout.version == CgroupVersion.V2 and write.resource == "cpu.shares"
            else canonical
        )
        if current == wanted:
            self._cache[spath] = (wanted_text, now)
            self._count(write.resource, "unchanged")
            return False
        if self.dry_run:
            level = logging.DEBUG if write.routine else logging.INFO
            log.log(level, "dry-run: would write %s: %s -> %s (%s)", path, current_text, wanted_text, write.reason)
            self.planned.append(write)
            self._count(write.resource, "dry_run")
            return True
        try:
            with open(path, "w") as f:
                f.write(wanted_text)
        except OSError as exc:
            log.warning("cgroup write %s: %s -> %s failed: %s", path, current_text, wanted_text, exc)
            self._cache.pop(spath, None)
            self._count(write.resource, "error")
            return False
        level = logging.DEBUG if write.routine else logging.INFO
        log.log(level, "cgroup %s: %s -> %s (%s)", path, current_text, wanted_text, write.reason)
        self._cache[spath] = (wanted_text, now)
        self._count(write.resource, "written")
        if (
            write.resource == "cpu.cfs_quota_us"
            and self._clamped
            and self.layout.version == CgroupVersion.V1
            and not _is_lower(wanted_text, current_text)
        ):
            self._raise_clamped_children(path, write.routine)
        return True

    def _remember_lowered(self, child_dir: str, name: str, held: int, reason: str, routine: bool = False) -> None:
        """A child quota was lowered to fit a new parent quota: remember the value it held (unless a clamped
        request is already remembered) so that it rises again with the parent; ``routine``: the lowering was
        one step of a continuous adjustment, and so is the rise (logged at DEBUG)."""
        spath = os.path.join(child_dir, name)
        if spath in self._clamped:
            return
        rel = os.path.relpath(child_dir, self.layout.root / "cpu")
        # a value the kubelet set above all cpus of the node is restored as the largest one in bounds
        held = min(held, self.bounds.max_cfs_quota)
        write = CgroupWrite("cpu.cfs_quota_us", rel, str(held), reason or "restore after parent quota", routine=routine)
        self._clamped[spath] = (os.path.dirname(child_dir), write)

    def _raise_clamped_children(self, path: Path, routine: bool = False) -> None:
        """The quota at ``path`` rose: apply again the writes of its child dirs that it had clamped. When the
        rise was ``routine`` (one step of BE suppression), so are the writes it causes (logged at DEBUG)."""
        parent_dir = os.path.dirname(str(path))
        for write in [w for grandparent, w in self._clamped.values() if grandparent == parent_dir]:
            self.update(dataclasses.replace(write, routine=True) if routine else write, verify=True)

    def _fit_quota(
        self, path: Path, canonical: str, reason: str, current: int | None = None, *, routine: bool = False
    ) -> str:
        """cgroup v1 refuses a cfs quota above the parent's or below a child's (EINVAL): clamp the new value
        to the parent's quota, and first lower children (and grandchildren, bottom-up) that exceed it.

        ``current``: the dir's quota now (us); children are only scanned when the quota is lowered (the kernel
        keeps them at or below the current one, so a raise cannot conflict). ``routine``: the write is one step
        of a continuous adjustment (BE suppression), so the clamps it causes are logged at DEBUG, not INFO."""
        level = logging.DEBUG if routine else logging.INFO
        quota = int(canonical)
        try:
            parent = int(read_text(path.parent.parent / path.name))
        except (OSError, ValueError):
            parent = -1
        if parent != -1 and (quota == -1 or quota > parent) and quota != -1:
            log.log(level, "%s: %d clamped to the parent's quota %d", path, quota, parent)
            quota = parent
        if quota == -1:
            return canonical if parent == -1 or canonical == "-1" else str(quota)
        if current is not None and current != -1 and quota >= current:
            return str(quota)
        children = _subdirs(str(path.parent))
        grandchildren = [g for d in children for g in _subdirs(d)]
        for d in [*grandchildren, *children]:
            f = Path(d) / path.name
            try:
                cur = int(read_text(f))
                if cur == -1 or cur <= quota:
                    continue
                if self.dry_run:
                    log.log(level, "dry-run: would write %s: %d -> %d (%s)", f, cur, quota, reason)
                    continue
                with open(f, "w") as fh:
                    fh.write(str(quota))
                self._cache.pop(str(f), None)
                self._remember_lowered(d, path.name, cur, reason, routine)
                log.log(level, "cgroup %s: %d -> %d (below the parent's new quota)", f, cur, quota)
            except (OSError, ValueError):
                continue
        return str(quota)

    def update_batch(self, writes: Iterable[CgroupWrite], *, verify: bool = False) -> int:
        """Apply writes in order (callers order cpuset writes top-down / bottom-up); return how many changed.

        ``verify``: read every file again even when its value was written or seen within ``cache_ttl``.
        """
        return sum(1 for w in writes if self.update(w, verify=verify))

    def update_leveled(self, levels: list[list[CgroupWrite]], *, verify: bool = False) -> int:
        """Apply ``cpuset.cpus`` writes level by level, parents (``levels[0]``) first, so the kernel never sees a
        child wider than its parent (v1 refuses it with EINVAL) nor a parent narrower than a child (EBUSY).

        Follows upstream ``LeveledUpdateBatch`` with ``MergeConditionIfCPUSetIsLooser``: top-down, a dir whose
        wanted cpus are not a subset of the cpus it has now is first widened to the union of both; then
        bottom-up every dir gets its wanted cpus. Writes of other resources are applied in the second pass.
        Each write is validated like :meth:`update` (a refused union is logged and the narrowing still runs).

        Returns:
            how many writes changed a file (a widened-then-narrowed dir counts twice).
        """
        changed = 0
        for level in levels:
            for write in level:
                widen = self._widening(write)
                if widen is not None and self.update(widen, verify=True):
                    changed += 1
        for level in reversed(levels):
            for write in level:
                if self.update(write, verify=verify):
                    changed += 1
        return changed

    def _widening(self, write: CgroupWrite) -> CgroupWrite | None:
        """The union write that must precede ``write`` (a cpuset not within the dir's current cpus), or None."""
        if write.resource != "cpuset.cpus":
            return None
        prepared = self._prepare(write)
        if isinstance(prepared, _Refused):
            return None
        path, canonical, _text = prepared
        if path is None:
            return None
        try:
            current = set(parse_cpuset(read_text(path)))
        except (OSError, ValueError):
            return None
        wanted = set(parse_cpuset(canonical))
        if wanted <= current:
            return None
        reason = f"{write.reason}: widen before narrow" if write.reason else "widen before narrow"
        return CgroupWrite(write.resource, write.rel_dir, format_cpuset(current | wanted), reason)

    def update_host(self, write: HostWrite, *, verify: bool = False) -> bool:
        """Apply one node-wide write (:mod:`agent.hostfiles`); True when the file was (or, in dry-run, would be)
        changed. Refused values (unknown file, outside the roots, malformed, out of bounds) are logged once and
        counted ``invalid``; a missing file (the kernel lacks the feature) is logged once and counted ``missing``;
        a kernel error is logged and counted ``error``. Never raises. ``tasks`` writes are never cached nor
        compared (a tid may be reused); a ``schemata`` line is unchanged when the file holds all its domains.
        """
        resource = write.resource
        try:
            text = check_host_value(write, self.host_roots)
        except InvalidHostWrite as exc:
            seen = (str(write.path), write.value)
            if seen not in self._refused_logged:
                if len(self._refused_logged) >= 4096:
                    self._refused_logged.clear()
                self._refused_logged.add(seen)
                log.warning("host value invalid, not written: %s (%s)", exc, write.reason or "no reason given")
            self._count(resource, "invalid")
            return False
        spath = str(write.path)
        now = time.monotonic()
        if resource != "tasks":
            cached = self._cache.get(f"{spath}#{text}")
            if not verify and cached is not None and now - cached[1] < self.cache_ttl:
                self._count(resource, "unchanged")
                return False
            try:
                current = read_text(write.path)
            except OSError:
                self._log_missing(write.path, "file is missing (kernel or mount does not offer it)")
                self._count(resource, "missing")
                return False
            same = schemata_has(current, text) if resource == "schemata" else current.split() == [text]
            if same:
                self._cache[f"{spath}#{text}"] = (text, now)
                self._count(resource, "unchanged")
                return False
        else:
            current = "-"
            if not write.path.exists():
                self._log_missing(write.path, "file is missing (resctrl group not created)")
                self._count(resource, "missing")
                return False
        level = logging.DEBUG if resource == "tasks" else logging.INFO
        if self.dry_run:
            log.log(level, "dry-run: would write %s: %s -> %s (%s)", spath, current, text, write.reason)
            self.planned_host.append(write)
            self._count(resource, "dry_run")
            return True
        try:
            with open(write.path, "w") as f:
                f.write(text + "\n" if resource == "schemata" else text)
        except OSError as exc:
            log.log(
                logging.DEBUG if resource == "tasks" else logging.WARNING,
                "host write %s: %s -> %s failed: %s",
                spath,
                current,
                text,
                exc,
            )
            self._cache.pop(f"{spath}#{text}", None)
            self._count(resource, "error")
            return False
        log.log(level, "host %s: %s -> %s (%s)", spath, current, text, write.reason)
        if resource != "tasks":
            for key in [k for k in self._cache if k.startswith(spath + "#")]:
                del self._cache[key]
            self._cache[f"{spath}#{text}"] = (text, now)
        self._count(resource, "written")
        return True

    def make_group_dir(self, path: Path) -> bool:
        """Create a resctrl group dir (``<resctrl>/<group>``) when missing; True when created (or, in dry-run, would
        be). A path that is not a plain child of the resctrl mount is refused (logged, counted ``invalid``); a
        kernel error (no more CLOSIDs) is logged and counted ``error``."""
        path = Path(path)
        if path.parent != self.host_roots.resctrl or path.name in ("", ".", "..", "info", "mon_groups", "mon_data"):
            log.warning("resctrl group %s refused: not a group dir of %s", path, self.host_roots.resctrl)
            self._count("resctrl_group", "invalid")
            return False
        if path.is_dir():
            return False
        if self.dry_run:
            log.info("dry-run: would create resctrl group %s", path)
            self._count("resctrl_group", "dry_run")
            return True
        try:
            path.mkdir()
        except FileExistsError:
            return False
        except OSError as exc:
            log.warning("resctrl group %s not created: %s", path, exc)
            self._count("resctrl_group", "error")
            return False
        log.info("resctrl group %s created", path)
        self._count("resctrl_group", "written")
        return True

    def update_host_batch(self, writes: Iterable[HostWrite], *, verify: bool = False) -> int:
        """Apply node-wide writes in order (:meth:`update_host`); return how many changed."""
        return sum(1 for w in writes if self.update_host(w, verify=verify))

    def forget(self, rel_dir_prefix: str) -> None:
        """Drop cached values under a dir (a pod went away)."""
        for path in [p for p in self._cache if rel_dir_prefix in p]:
            del self._cache[path]
        for path in [p for p in self._clamped if rel_dir_prefix in p]:
            del self._clamped[path]

    def _log_missing(self, path: Path, why: str) -> None:
        if path not in self._missing_logged:
            self._missing_logged.add(path)
            log.info("skipping %s: %s", path, why)
