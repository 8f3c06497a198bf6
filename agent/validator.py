"""Bounds of the cgroup values the agent writes, checked by the executor before every write.

Follows upstream ``pkg/koordlet/util/system/validator.go`` (``RangeValidator``, ``CPUSetStrValidator``)
with the ranges of ``cgroup_resource.go``; the static ranges live in :data:`agent.cgroups.RESOURCES`
(``cpu.shares`` 2..262144, ``cpu.bvt_warp_ns`` -1..2, ``cpu.idle`` 0..1, memory values >= 0; every
integer also fits int64, as upstream parses with ``ParseInt(value, 10, 64)``). Two bounds depend on
the node and are stricter than upstream, which validates neither:

- ``cpu.cfs_quota_us`` (v2 ``cpu.max``): -1 (unlimited) or 1000 .. node cpus x 100000 us (the default
  CFS period the agent computes every quota for). A quota above all cpus of the node limits nothing,
  so refusing it changes no behaviour of a sane plan, while a runaway one (a NodeSLO threshold of
  1000000 % planned 1999997100 us) never reaches the kernel.
- ``cpuset.cpus``: non-empty and within the node's online cpus (``/sys/devices/system/cpu/online``);
  the kernel refuses offline cpus with EINVAL anyway, but only after the cgroups above were widened.

A refused value raises :class:`OutOfBounds`, whose message names the resource, the value and the range.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent.cgroups import CFS_PERIOD_US, RESOURCES, format_cpuset, parse_cpuset, read_text

#: Largest value of an int64 (upstream parses every cgroup integer with ``ParseInt(v, 10, 64)``).
INT64_MAX = (1 << 63) - 1


class OutOfBounds(ValueError):
    """A well-formed cgroup value outside its range.

    Attributes:
        resource: upstream resource name (``cpu.cfs_quota_us``).
        value: the refused value as given.
        allowed: the range in words (``-1 or [1000, 200000]``).
    """

    def __init__(self, resource: str, value: str, allowed: str) -> None:
        super().__init__(f"{resource} value {value} is outside {allowed}")
        self.resource = resource
        self.value = value
        self.allowed = allowed


@dataclass(frozen=True, slots=True)
class NodeBounds:
    """What the node-dependent bounds depend on.

    Attributes:
        cpu_capacity_milli: the node's cpus in milli-cores (None: quotas bounded by int64 only).
        online_cpus: ids of the online cpus (None: cpusets are only checked to parse and be non-empty).
    """

    cpu_capacity_milli: int | None = None
    online_cpus: frozenset[int] | None = None

    @property
    def max_cfs_quota(self) -> int:
        """Largest ``cpu.cfs_quota_us`` in microseconds: capacity (milli-cores) x 100000 us / 1000."""
        if self.cpu_capacity_milli is None:
            return INT64_MAX
        return max(self.cpu_capacity_milli * CFS_PERIOD_US // 1000, RESOURCES["cpu.cfs_quota_us"].minimum or 0)


def read_online_cpus(sys_cpu: Path = Path("/sys/devices/system/cpu")) -> frozenset[int] | None:
    """The ids of the online cpus from ``<sys_cpu>/online`` (``"0-3,6"``); None when unreadable or malformed."""
    try:
        cpus = parse_cpuset(read_text(sys_cpu / "online"))
    except (OSError, ValueError):
        return None
    return frozenset(cpus) or None


def check_integer(resource: str, number: int, bounds: NodeBounds) -> None:
    """Check an integer value (v1 terms; -1 = unlimited already accepted by the caller where allowed).

    Raises:
        OutOfBounds: below the resource's minimum, above its maximum (``cpu.cfs_quota_us``: above
            :attr:`NodeBounds.max_cfs_quota`) or beyond int64.
        KeyError: unknown resource.
    """
    res = RESOURCES[resource]
    low = res.minimum
    high = res.maximum if res.maximum is not None else INT64_MAX
    if resource == "cpu.cfs_quota_us":
        high = bounds.max_cfs_quota
    if (low is not None and number < low) or number > high:
        lo_text = str(low) if low is not None else "-inf"
        allowed = f"[{lo_text}, {high}]"
        if res.allow_unlimited:
            allowed = f"-1 or {allowed}"
        raise OutOfBounds(resource, str(number), allowed)


def check_cpuset(resource: str, cpus: list[int], bounds: NodeBounds) -> None:
    """Check a parsed cpu list: non-empty and within the online cpus (when known).

    Raises:
        OutOfBounds: the list is empty or names an offline / missing cpu.
    """
    online = bounds.online_cpus
    allowed = f"the online cpus {format_cpuset(sorted(online))}" if online is not None else "a non-empty cpu list"
    if not cpus or (online is not None and not online.issuperset(cpus)):
        raise OutOfBounds(resource, format_cpuset(cpus) if cpus else '""', allowed)
