"""The node-wide files the agent writes besides cgroups: memory sysctls, the memcg reaper and resctrl.

Follows upstream ``pkg/koordlet/util/system/system_resource.go`` (``MinFreeKbytes``, ``WatermarkScaleFactor``,
``MemcgReapBackGround`` and their ``RangeValidator`` bounds) and ``resctrl.go`` (group ``schemata`` and ``tasks``).
A :class:`HostWrite` names one of :data:`HOST_RESOURCES` and the absolute file; the executor
(:meth:`agent.executor.CgroupExecutor.update_host`) checks that the file has the resource's name and lies under
one of the roots it was given (:class:`HostRoots`), validates the value, skips it when already in place, logs
``old -> new`` and, in dry-run, only plans.

Values:

- ``min_free_kbytes``: KiB, 10240 .. 10485760 (``/proc/sys/vm/min_free_kbytes``).
- ``watermark_scale_factor``: 10 .. 400, in units of 0.01 % of memory (``/proc/sys/vm/watermark_scale_factor``).
- ``reap_background``: 0 | 1 (Anolis ``/sys/kernel/mm/memcg_reaper/reap_background``).
- ``schemata``: one resctrl schemata line, ``L3:<cache id>=<hex mask>;...`` or ``MB:<cache id>=<n>;...``; the
  file holds one line per resource, and a write replaces only the domains it names.
- ``tasks``: one thread id (the kernel takes one per write); never cached, as a tid can be reused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path


class InvalidHostWrite(ValueError):
    """A host write names an unknown resource, a file outside the agent's roots, or a malformed value."""


@dataclass(frozen=True, slots=True)
class HostResource:
    """One node-wide file the agent writes.

    Attributes:
        name: the file name (``min_free_kbytes``); also the resource name in logs and metrics.
        kind: ``int`` (bounded integer), ``schemata`` (one resctrl line) or ``tasks`` (one thread id).
        minimum / maximum: inclusive bounds of an ``int`` value.
    """

    name: str
    kind: str
    minimum: int | None = None
    maximum: int | None = None


#: The node-wide resources, keyed by file name.
HOST_RESOURCES: dict[str, HostResource] = {
    r.name: r
    for r in (
        HostResource("min_free_kbytes", "int", 10 * 1024, 10 * 1024 * 1024),
        HostResource("watermark_scale_factor", "int", 10, 400),
        HostResource("reap_background", "int", 0, 1),
        HostResource("schemata", "schemata"),
        HostResource("tasks", "tasks", 1, (1 << 22)),
    )
}


@dataclass(frozen=True, slots=True)
class HostWrite:
    """A wanted value of a node-wide file.

    Attributes:
        path: the absolute file (``/proc/sys/vm/min_free_kbytes``, ``/sys/fs/resctrl/BE/schemata``).
        value: the text to write (see the module docstring for each resource).
        reason: why (logged), e.g. ``SystemConfig`` or ``ResctrlReconcile``.
    """

    path: Path
    value: str
    reason: str = ""

    @property
    def resource(self) -> str:
        """The resource name: the file's name."""
        return self.path.name


@dataclass(frozen=True, slots=True)
class HostRoots:
    """Where host writes may go: the proc and sys mounts and the resctrl mount.

    Attributes:
        proc: the proc mount (``/proc``; ``/host/proc`` in a container).
        sys: the sysfs mount (``/sys``).
        resctrl: the resctrl mount (``/sys/fs/resctrl``).
    """

    proc: Path = Path("/proc")
    sys: Path = Path("/sys")
    resctrl: Path = field(default=Path("/sys/fs/resctrl"))

    def allowed(self) -> tuple[Path, ...]:
        """The dirs a host write may name a file in (their files directly, resctrl groups one level below)."""
        return (self.proc / "sys" / "vm", self.sys / "kernel" / "mm" / "memcg_reaper", self.resctrl)

    def vm_file(self, name: str) -> Path:
        """``<proc>/sys/vm/<name>``."""
        return self.proc / "sys" / "vm" / name

    def reaper_file(self) -> Path:
        """``<sys>/kernel/mm/memcg_reaper/reap_background``."""
        return self.sys / "kernel" / "mm" / "memcg_reaper" / "reap_background"


_SCHEMATA = re.compile(r"^(L3|L3CODE|L3DATA|MB):(\d+=[0-9A-Fa-f]+(;\d+=[0-9A-Fa-f]+)*)$")


def parse_schemata_line(line: str) -> tuple[str, dict[int, str]]:
    """``"L3:0=7ff;1=f"`` -> ``("L3", {0: "7ff", 1: "f"})``; masks lower-case without leading zeros, MB values
    decimal as given.

    Raises:
        ValueError: not a schemata line of L3 / L3CODE / L3DATA / MB, or an MB value that is not decimal.
    """
    m = _SCHEMATA.match(line.strip())
    if not m:
        raise ValueError(f"{line.strip()!r} is not a schemata line 'L3:<id>=<mask>;...' or 'MB:<id>=<n>;...'")
    kind = m.group(1)
    domains: dict[int, str] = {}
    for item in m.group(2).split(";"):
        cache_id, _, val = item.partition("=")
        if kind == "MB":
            if not val.isdigit():
                raise ValueError(f"MB value {val!r} of domain {cache_id} is not a decimal number")
            domains[int(cache_id)] = str(int(val))
        else:
            domains[int(cache_id)] = format(int(val, 16), "x")
    return kind, domains


def schemata_has(current: str, wanted: str) -> bool:
    """Whether the schemata file content ``current`` already holds every domain of the line ``wanted``."""
    kind, domains = parse_schemata_line(wanted)
    for line in current.splitlines():
        try:
            have_kind, have = parse_schemata_line(line)
        except ValueError:
            continue
        if have_kind == kind:
            return all(have.get(k) == v for k, v in domains.items())
    return False


def check_host_value(write: HostWrite, roots: HostRoots) -> str:
    """The text to write for ``write``, checked.

    Raises:
        InvalidHostWrite: unknown resource, a file outside ``roots`` (or a resctrl file not directly in a group
            dir), or a value that does not parse or is out of the resource's bounds.
    """
    res = HOST_RESOURCES.get(write.resource)
    if res is None:
        raise InvalidHostWrite(f"unknown host resource {write.resource!r} ({write.path})")
    path = Path(write.path)
    parent = path.parent
    if ".." in path.parts or not path.is_absolute():
        raise InvalidHostWrite(f"{path} is not an absolute path without '..'")
    allowed = roots.allowed()
    if res.kind in ("schemata", "tasks"):
        ok = parent == roots.resctrl or parent.parent == roots.resctrl
    else:
        ok = parent in allowed[:2]
    if not ok:
        raise InvalidHostWrite(f"{path} is outside the agent's host roots {', '.join(str(p) for p in allowed)}")
    text = write.value.strip()
    if res.kind == "schemata":
        try:
            kind, domains = parse_schemata_line(text)
        except ValueError as exc:
            raise InvalidHostWrite(f"{path}: {exc}") from None
        return f"{kind}:" + ";".join(f"{k}={v}" for k, v in sorted(domains.items()))
    try:
        number = int(text)
    except ValueError:
        raise InvalidHostWrite(f"{path}: {write.value!r} is not an integer") from None
    if (res.minimum is not None and number < res.minimum) or (res.maximum is not None and number > res.maximum):
        raise InvalidHostWrite(f"{path}: {number} is outside [{res.minimum}, {res.maximum}]")
    return str(number)
