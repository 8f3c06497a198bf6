"""BE CPU suppress: keep BE pods inside what LS pods and the system leave under the threshold.

Follows upstream ``qosmanager/plugins/cpusuppress/cpu_suppress.go`` and ``qosmanager/helpers/calculator.go``::

    suppress(BE) = capacity * cpuSuppressThresholdPercent / 100 - podNonBE.used - hostAppNonBE.used
                   - max(node.used - Σ pod.used - Σ hostApp.used, 0, nodeReserved)

where a pod is BE by its ``koordinator.sh/qosClass`` label or kube QoS BestEffort (a pod the agent does
not know counts as non-BE), and a host application (``NodeSLO.spec.hostApplications``, measured by
:mod:`agent.collectors.hostapps`) counts as BE only when its QoS is BE *and* it runs under the
besteffort dir (``cgroupPath.base: KubepodsBesteffort``), as upstream's ``NonBEHostAppFilter``; a host
app without a fresh measurement counts nowhere, as upstream's ``CalculateFilterPodsUsed``.

floored at ``capacity * cpuSuppressMinPercent / 100`` when set (all milli-cores). Policies:

- ``cfsQuota``: ``quota = max(suppress * 100000 / 1000, 2000)`` on the besteffort QoS dir; skipped when
  ``|new - cur| < capacity_cores * 100000 * 0.01`` (unless new is the 2000 floor); increases are
  limited to ``capacity_cores * 100000 * 0.1`` per round once a quota is set.
- ``cpuset``: ``cpus = max(ceil(suppress / 1000), 2)``, growing by at most ``ceil(#cpus * 0.1)`` per round,
  picked HT-pairs first (:mod:`agent.qos.cpuset_picker`), written to the besteffort dir and every BE
  pod / container dir: the union of old and new top-down first, then the new set bottom-up. As upstream there
  is no fall-back: on a node of 2 cpus the floor is every cpu, so BE is not squeezed by cpuset at all; the log
  line says so (``the floor of 2 cpus = every cpu of this 2-cpu node``) and ``cfsQuota`` is the policy that
  goes lower there.

Logged: the start, a policy switch and the stop at INFO with the figures of that round; then the current
figures (target, LS usage, the cpuset or quota really applied) at INFO at most once a minute when they changed,
and every round at DEBUG.

Switching policy (or disabling) restores the other mechanism: quota -1, full BE cpuset.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from agent.cgroups import CFS_PERIOD_US, format_cpuset, read_cfs_quota, read_cpuset
from agent.collectors.hostapps import HostApp
from agent.executor import CgroupWrite
from agent.qos.context import NODE_CPU, QoSContext
from agent.qos.cpuset_picker import pick_cpus
from agent.states.pods import PodMeta

log = logging.getLogger("agent.qos.cpusuppress")

BYPASS_QUOTA_DELTA_RATIO = 0.01
BE_MIN_CPUSET_CORES = 2
#: Seconds between INFO lines with the current figures while suppression only adjusts.
STATUS_LOG_SECONDS = 60.0
BE_MIN_QUOTA = 2000
BE_MAX_INCREASE_CPU_PERCENT = 0.1
REASON = "AdjustBEByNodeCPUUsage"
POLICY_CFS_QUOTA = "cfsQuota"
POLICY_CPUSET = "cpuset"


@dataclass(slots=True)
class SuppressResult:
    """One round's decision: target milli-cores, LS (non-BE) pod usage in cores, the policy and its value
    (quota in microseconds per period, or the cpu list), and the writes to perform."""

    suppress_milli: int
    ls_used_cores: float
    policy: str
    quota: int | None
    cpus: list[int] | None
    writes: list[CgroupWrite]


def calculate_suppress(
    capacity_milli: int,
    node_used_cores: float,
    pod_used_cores: dict[str, float],
    pods: list[PodMeta],
    threshold_percent: int,
    min_percent: int | None,
    reserved_milli: int,
    host_apps: list[HostApp] | None = None,
    host_app_used_cores: dict[str, float] | None = None,
) -> tuple[int, float]:
    """``(suppress milli-cores, non-BE pod usage in cores)`` by upstream's formula (``calculateBESuppressCPU``
    over ``CalculateFilterPodsUsed`` with ``NonBEPodFilter`` and ``NonBEHostAppFilter``; see the module
    docstring). Usages are in cores; ``host_app_used_cores`` is keyed by host application name.
    """
    by_uid = {p.uid: p for p in pods}
    all_used = sum(pod_used_cores.values())
    non_be = sum(v for uid, v in pod_used_cores.items() if uid not in by_uid or not by_uid[uid].is_be)
    apps_used, apps_non_be = 0.0, 0.0
    measured = host_app_used_cores or {}
    for app in host_apps or []:
        used = measured.get(app.name)
        if used is None:
            continue
        apps_used += used
        if not app.is_be_in_besteffort:
            apps_non_be += used
    system = max(node_used_cores - all_used - apps_used, 0.0, reserved_milli / 1000)
    suppress = (
        capacity_milli * threshold_percent // 100 - int(non_be * 1000) - int(apps_non_be * 1000) - int(system * 1000)
    )
    if min_percent is not None:
        suppress = max(suppress, capacity_milli * min_percent // 100)
    return suppress, non_be


def cfs_quota_target(suppress_milli: int, current: int, capacity_milli: int) -> int | None:
    """The new BE quota (us per 100 ms period), None when the change is too small (``adjustByCfsQuota``)."""
    new = max(suppress_milli * CFS_PERIOD_US // 1000, BE_MIN_QUOTA)
    cores = capacity_milli // 1000
    min_delta = cores * CFS_PERIOD_US * BYPASS_QUOTA_DELTA_RATIO
    if abs(new - current) < min_delta and new != BE_MIN_QUOTA:
        return None
    max_increase = cores * CFS_PERIOD_US * BE_MAX_INCREASE_CPU_PERCENT
    if new - current > max_increase and current != -1:
        new = current + int(max_increase)
    return new


class CPUSuppress:
    """The strategy; remembers which policy is in use or recovered, as upstream's ``suppressPolicyStatuses``."""

    def __init__(self) -> None:
        self.statuses: dict[str, str] = {}
        #: The policy suppressing BE now (``cfsQuota`` / ``cpuset``), or None: each round's step is logged at
        #: DEBUG (routine writes), a change of regime once at INFO.
        self.regime: str | None = None
        #: (when, figures) of the last INFO line while suppressing: the current figures are logged again at most
        #: every STATUS_LOG_SECONDS when they changed, so the log never keeps only those of the regime change
        self._status: tuple[float, str] = (-1e18, "")

    def _enter(self, regime: str | None, detail: str, now: float = 0.0) -> None:
        """Log at INFO when BE suppression starts, changes policy or stops (with the current figures); while it
        only adjusts, the current figures at INFO at most every ``STATUS_LOG_SECONDS`` when they changed, and
        each round at DEBUG."""
        if regime != self.regime:
            if regime is None:
                log.info("suppressBECPU: BE pods no longer suppressed (%s)", detail)
            else:
                log.info("suppressBECPU: suppressing BE pods by %s (%s)", regime, detail)
            self.regime = regime
            self._status = (now, detail)
            return
        if regime is None:
            return
        log.debug("suppressBECPU: %s: %s", regime, detail)
        last_at, last = self._status
        if detail != last and now - last_at >= STATUS_LOG_SECONDS:
            log.info("suppressBECPU: still suppressing BE pods by %s (%s)", regime, detail)
            self._status = (now, detail)

    def be_dirs(self, ctx: QoSContext) -> list[str]:
        """The besteffort dir, then its pod dirs, then their container dirs (depth <= 2), in the cpuset controller."""
        top = ctx.layout.qos_dir("BestEffort")
        pods = ctx.layout.subdirs(top, "cpuset")
        containers = [c for p in pods for c in ctx.layout.subdirs(p, "cpuset")]
        return [top, *pods, *containers]

    def _all_be_cpus(self, ctx: QoSContext) -> list[int]:
        return [p.cpu_id for p in ctx.processors]

    def recover_quota(self, ctx: QoSContext) -> list[CgroupWrite]:
        """Quota -1 on the besteffort dir, once per recovery."""
        if self.statuses.get(POLICY_CFS_QUOTA) == "recovered":
            return []
        self.statuses[POLICY_CFS_QUOTA] = "recovered"
        return [CgroupWrite("cpu.cfs_quota_us", ctx.layout.qos_dir("BestEffort"), "-1", "recover bestEffort cfsQuota")]

    def recover_cpuset(self, ctx: QoSContext) -> list[CgroupWrite]:
        """Every BE dir back to all cpus, top-down, once per recovery."""
        if self.statuses.get(POLICY_CPUSET) == "recovered":
            return []
        self.statuses[POLICY_CPUSET] = "recovered"
        cpus = format_cpuset(self._all_be_cpus(ctx))
        return [CgroupWrite("cpuset.cpus", d, cpus, "recover bestEffort cpuset") for d in self.be_dirs(ctx)]

    def plan(self, ctx: QoSContext) -> SuppressResult | list[CgroupWrite]:
        """The writes of this round: a :class:`SuppressResult` when suppressing, or recovery writes
        (possibly none) when the feature or the NodeSLO disables it or inputs are missing."""
        if not ctx.feature_active("BECPUSuppress"):
            self._enter(None, "BECPUSuppress is off or the NodeSLO disables it")
            return self.recover_quota(ctx) + self.recover_cpuset(ctx)
        node_used = ctx.cache.last(NODE_CPU, ctx.now, 2 * ctx.interval + 0.5)
        pod_used = ctx.last_pod_values("pod_cpu")
        if node_used is None or not ctx.pods:
            log.debug("suppressBECPU skipped: node metric %s, %d pods", node_used, len(ctx.pods))
            return []
        th = ctx.thresholds
        suppress, ls_used = calculate_suppress(
            ctx.capacity_cpu,
            node_used,
            pod_used,
            ctx.pods,
            th.cpu_suppress_threshold_percent if th.cpu_suppress_threshold_percent is not None else 65,
            th.cpu_suppress_min_percent,
            ctx.reserved_cpu,
            ctx.host_apps,
            ctx.last_pod_values("host_app_cpu"),
        )
        be_dir = ctx.layout.qos_dir("BestEffort")
        if th.cpu_suppress_policy == POLICY_CFS_QUOTA:
            try:
                current, _period = read_cfs_quota(ctx.layout, be_dir)
            except OSError as exc:
                log.warning("suppressBECPU: cannot read the besteffort quota: %s", exc)
                return []
            quota = cfs_quota_target(suppress, current, ctx.capacity_cpu)
            writes = [] if quota is None else [CgroupWrite("cpu.cfs_quota_us", be_dir, str(quota), REASON, True)]
            applied = quota if quota is not None else current
            self._enter(
                POLICY_CFS_QUOTA,
                f"{suppress} milli-cores for BE, LS pods using {ls_used:.2f} cores; besteffort cfs quota {applied} us",
                ctx.now,
            )
            self.statuses[POLICY_CFS_QUOTA] = "using"
            writes += self.recover_cpuset(ctx)
            return SuppressResult(
                suppress, ls_used, POLICY_CFS_QUOTA, quota if quota is not None else current, None, writes
            )
        try:
            old = read_cpuset(ctx.layout, be_dir)
        except (OSError, ValueError) as exc:
            log.warning("suppressBECPU: cannot read the besteffort cpuset: %s", exc)
            return []
        cpus = self.cpuset_target(ctx, suppress, old)
        self._enter(POLICY_CPUSET, self.cpuset_detail(ctx, suppress, ls_used, cpus), ctx.now)
        self.statuses[POLICY_CPUSET] = "using"
        writes = self.cpuset_writes(ctx, cpus, old) if cpus else []
        return SuppressResult(suppress, ls_used, POLICY_CPUSET, None, cpus, writes + self.recover_quota(ctx))

    @staticmethod
    def cpuset_detail(ctx: QoSContext, suppress_milli: int, ls_used: float, cpus: list[int]) -> str:
        """What the cpuset policy really applies: the target, the cpus, and the floor when it decides (at least
        ``BE_MIN_CPUSET_CORES`` cpus, as upstream; on a node of that many cpus BE keeps every cpu and is not
        squeezed at all: only ``cpuSuppressPolicy: cfsQuota`` goes lower)."""
        text = (
            f"{suppress_milli} milli-cores for BE, LS pods using {ls_used:.2f} cores; "
            f"besteffort cpuset {format_cpuset(cpus) or '(unchanged)'} ({len(cpus)} cpus)"
        )
        if math.ceil(suppress_milli / 1000) < BE_MIN_CPUSET_CORES:
            text += f", the floor of {BE_MIN_CPUSET_CORES} cpus"
            if len(ctx.processors) <= BE_MIN_CPUSET_CORES:
                text += (
                    f" = every cpu of this {len(ctx.processors)}-cpu node: BE is not squeezed by cpuset here "
                    "(cpuSuppressPolicy: cfsQuota goes below 2 cpus)"
                )
        return text

    def cpuset_target(self, ctx: QoSContext, suppress_milli: int, old: list[int]) -> list[int]:
        """The BE cpus for ``suppress_milli`` (``adjustByCPUSet``): LSE-bound cpus are excluded, LSR-bound
        ones contribute their share; the rest come from the LS pool."""
        count = max(math.ceil(suppress_milli / 1000), BE_MIN_CPUSET_CORES)
        max_increase = math.ceil(len(ctx.processors) * BE_MAX_INCREASE_CPU_PERCENT)
        if count - len(old) > max_increase:
            count = len(old) + max_increase
        lsr, ls = [], []
        bound = _bound_cpus(ctx.pods)
        for p in ctx.processors:
            if bound.get(p.cpu_id) == "LSR":
                lsr.append(p)
            elif bound.get(p.cpu_id) != "LSE":
                ls.append(p)
        lsr_count = count * len(lsr) // (len(lsr) + len(ls)) if (lsr or ls) else 0
        picked: list[int] = []
        if lsr_count > 0:
            picked += pick_cpus(lsr_count, lsr)
        if count - lsr_count > 0:
            picked += pick_cpus(count - lsr_count, ls)
        return picked

    def cpuset_writes(self, ctx: QoSContext, cpus: list[int], old: list[int]) -> list[CgroupWrite]:
        """Union top-down, then the new set bottom-up (``applyCPUSetWithNonePolicy``)."""
        dirs = self.be_dirs(ctx)
        union = format_cpuset(set(old) | set(cpus))
        new = format_cpuset(cpus)
        return [CgroupWrite("cpuset.cpus", d, union, REASON, True) for d in dirs] + [
            CgroupWrite("cpuset.cpus", d, new, REASON, True) for d in reversed(dirs)
        ]


def _bound_cpus(pods: list[PodMeta]) -> dict[int, str]:
    """cpu id -> koord QoS of the pod whose ``scheduling.koordinator.sh/resource-status`` binds it."""
    import json

    from agent.cgroups import parse_cpuset

    out: dict[int, str] = {}
    for pod in pods:
        raw = pod.annotations.get("scheduling.koordinator.sh/resource-status")
        if not raw:
            continue
        try:
            cpuset = json.loads(raw).get("cpuset") or ""
            for cpu in parse_cpuset(cpuset):
                out[cpu] = pod.qos_raw.value
        except (ValueError, AttributeError):
            continue
    return out
