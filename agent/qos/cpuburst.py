"""CPU burst: let LS pods run above their cpu limit for short spikes while the node's shared pool is idle.

Follows upstream ``qosmanager/plugins/cpuburst/cpu_burst.go`` (feature gate ``CPUBurst``), driven by
``NodeSLO.spec.cpuBurstStrategy`` (defaults: policy ``none``, ``cpuBurstPercent`` 1000,
``cfsQuotaBurstPercent`` 300, ``cfsQuotaBurstPeriodSeconds`` -1, ``sharePoolThresholdPercent`` 50), which a
pod's ``koordinator.sh/cpuBurst`` annotation overrides field by field. Pods of QoS LSE, LSR and BE are never
burst (``IsPodCPUBurstable``); pods without a cpu limit neither.

- ``cpu.cfs_burst_us`` (v2 ``cpu.max.burst``; written only where the kernel has the file), with policy
  ``cpuBurstOnly`` or ``auto``: per container ``int(limit_cores * cpuBurstPercent / 100 * 100000)`` us, the
  pod dir the sum of its containers'; other policies write 0.
- CFS quota burst, with policy ``cfsQuotaBurstOnly`` or ``auto``, per container with a limit:
  ``base = limit * 100000 / 1000`` us (at least 1000), ``ceil = int(base * cfsQuotaBurstPercent / 100)``.
  The container was throttled in the last round (``cpu.stat`` ``nr_throttled`` grew) -> scale up
  (``x 1.2``), else remain; a token-bucket limiter (when ``cfsQuotaBurstPeriodSeconds >= 0``) that ran dry
  -> scale down (``x 0.8``); a policy without quota burst -> reset to ``base``. The node's state then
  overrides: share pool usage >= ``sharePoolThresholdPercent`` (overload) turns up/remain into down;
  within 90 % of it (cooling) or unknown turns up into remain. The target is clamped to ``[base, ceil]``;
  the pod dir's quota (when limited) moves by the same delta: pod first when rising, container first when
  falling.
- The shared pool: ``total = #cpus - Σ cpu requests of LSE/LSR pods`` and ``used = node cpu - Σ usage of
  LSE/LSR/BE pods`` (system usage counts as shared, conservatively), averaged over
  ``min(5 x interval, 10 s)``; ``used / total`` (1.0 when total <= 0) against the threshold.
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import dataclass, field
from typing import Any

from agent.cgroups import CFS_PERIOD_US, CgroupPathError, CgroupVersion, OpenFiles
from agent.executor import CgroupWrite
from agent.qos.context import NODE_CPU, QoSContext, pod_cpu_key
from agent.qos.isolation import batch_cfs_quota
from agent.states.pods import ContainerMeta, PodMeta
from app.api.koordext import QoSClass
from app.api.slo import CPUBurstStrategy

log = logging.getLogger("agent.qos.cpuburst")

#: The pod annotation overriding the node's burst config (``apis/slo/v1alpha1/pod.go``).
ANNOTATION_POD_CPU_BURST = "koordinator.sh/cpuBurst"

POLICY_NONE = "none"
POLICY_CPU_BURST_ONLY = "cpuBurstOnly"
POLICY_CFS_QUOTA_BURST_ONLY = "cfsQuotaBurstOnly"
POLICY_AUTO = "auto"

CFS_INCREASE_STEP = 1.2
CFS_DECREASE_STEP = 0.8
SHARE_POOL_COOLING_RATIO = 0.9
LIMITER_CONSUME_PERCENT = 100
LIMITER_SAVE_PERCENT = 60

# node states (nodeStateForBurst) and operations (cfsOperation)
OVERLOAD, COOLING, IDLE, UNKNOWN = "overload", "cooling", "idle", "unknown"
SCALE_UP, SCALE_DOWN, REMAIN, RESET = "scaleUp", "scaleDown", "remain", "reset"


@dataclass(frozen=True, slots=True)
class BurstConfig:
    """A pod's effective ``CPUBurstConfig`` (percents; seconds; -1 period = no limiter)."""

    policy: str = POLICY_NONE
    cpu_burst_percent: int = 1000
    cfs_quota_burst_percent: int = 300
    cfs_quota_burst_period_seconds: int = -1


def node_burst_config(strategy: CPUBurstStrategy) -> BurstConfig:
    """The node's config from the (defaults-merged) NodeSLO strategy; unset fields take upstream's defaults."""
    d = BurstConfig()
    return BurstConfig(
        policy=strategy.policy or d.policy,
        cpu_burst_percent=strategy.cpu_burst_percent if strategy.cpu_burst_percent is not None else d.cpu_burst_percent,
        cfs_quota_burst_percent=(
            strategy.cfs_quota_burst_percent
            if strategy.cfs_quota_burst_percent is not None
            else d.cfs_quota_burst_percent
        ),
        cfs_quota_burst_period_seconds=(
            strategy.cfs_quota_burst_period_seconds
            if strategy.cfs_quota_burst_period_seconds is not None
            else d.cfs_quota_burst_period_seconds
        ),
    )


_POD_FIELDS = {
    "policy": ("policy", str),
    "cpuBurstPercent": ("cpu_burst_percent", int),
    "cfsQuotaBurstPercent": ("cfs_quota_burst_percent", int),
    "cfsQuotaBurstPeriodSeconds": ("cfs_quota_burst_period_seconds", int),
}


def pod_burst_config(pod: PodMeta, node_cfg: BurstConfig) -> BurstConfig:
    """``node_cfg`` with the fields the pod's ``koordinator.sh/cpuBurst`` sets (``genPodBurstConfig``); a malformed
    annotation is logged and the node's config applies, as upstream."""
    raw = pod.annotations.get(ANNOTATION_POD_CPU_BURST)
    if not raw:
        return node_cfg
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        changes: dict[str, Any] = {}
        for key, (attr, kind) in _POD_FIELDS.items():
            value = data.get(key)
            if value is None:
                continue
            if kind is int and (not isinstance(value, int) or isinstance(value, bool)):
                raise ValueError(f"{key}: expected an integer, got {value!r}")
            if kind is str and not isinstance(value, str):
                raise ValueError(f"{key}: expected a string, got {value!r}")
            changes[attr] = value
    except ValueError as exc:
        log.info("pod %s: malformed %s, using the node's config: %s", pod.key, ANNOTATION_POD_CPU_BURST, exc)
        return node_cfg
    return BurstConfig(**{**_asdict(node_cfg), **changes})


def _asdict(cfg: BurstConfig) -> dict[str, Any]:
    return {
        k: getattr(cfg, k)
        for k in ("policy", "cpu_burst_percent", "cfs_quota_burst_percent", "cfs_quota_burst_period_seconds")
    }


def cpu_burst_enabled(policy: str) -> bool:
    """``cpuBurstOnly`` or ``auto``."""
    return policy in (POLICY_AUTO, POLICY_CPU_BURST_ONLY)


def cfs_quota_burst_enabled(policy: str) -> bool:
    """``cfsQuotaBurstOnly`` or ``auto``."""
    return policy in (POLICY_AUTO, POLICY_CFS_QUOTA_BURST_ONLY)


def is_burstable(pod: PodMeta) -> bool:
    """Not LSE, LSR nor BE by the ``koordinator.sh/qosClass`` label (``IsPodCPUBurstable``)."""
    return pod.qos_raw not in (QoSClass.LSE, QoSClass.LSR, QoSClass.BE)


def static_burst_us(limit_milli: int, cfg: BurstConfig) -> int:
    """``cpu.cfs_burst_us`` of a container: ``int(limit_cores * cpuBurstPercent / 100 * 100000)``, 0 without a
    limit or when the policy does not burst (``calcStaticCPUBurstVal``, float arithmetic as upstream)."""
    if not cpu_burst_enabled(cfg.policy) or limit_milli <= 0:
        return 0
    return int((limit_milli / 1000) * (cfg.cpu_burst_percent / 100) * CFS_PERIOD_US)


def node_state(
    node_used_cores: float | None,
    cpus: int,
    pods: list[PodMeta],
    pod_used_cores: dict[str, float],
    threshold_percent: int,
) -> str:
    """``overload`` | ``cooling`` | ``idle`` of the shared pool, ``unknown`` without a node measurement
    (``getNodeStateForBurst``; see the module docstring)."""
    if node_used_cores is None:
        return UNKNOWN
    total = float(cpus)
    used = node_used_cores
    for pod in pods:
        if pod.qos_raw in (QoSClass.LSE, QoSClass.LSR):
            total -= pod.requests.get("cpu", 0) / 1000
        if pod.qos_raw in (QoSClass.LSE, QoSClass.LSR, QoSClass.BE) and pod.uid in pod_used_cores:
            used -= pod_used_cores[pod.uid]
    threshold = threshold_percent / 100
    ratio = used / total if total > 0 else 1.0
    if ratio >= threshold:
        return OVERLOAD
    if threshold * SHARE_POOL_COOLING_RATIO <= ratio:
        return COOLING
    return IDLE


def change_by_node(state: str, operation: str) -> str:
    """The operation after the node's state (``changeOperationByNode``)."""
    if state == OVERLOAD and operation in (SCALE_UP, REMAIN):
        return SCALE_DOWN
    if state in (COOLING, UNKNOWN) and operation == SCALE_UP:
        return REMAIN
    return operation


def quota_target(current: int, base: int, ceil: int, operation: str) -> int:
    """The container's new quota (us): ``x 1.2`` up, ``x 0.8`` down, ``base`` on reset, clamped to ``[base, ceil]``."""
    target = current
    if operation == SCALE_UP:
        target = int(current * CFS_INCREASE_STEP)
    elif operation == SCALE_DOWN:
        target = int(current * CFS_DECREASE_STEP)
    elif operation == RESET:
        target = base
    return max(base, min(target, ceil))


class BurstLimiter:
    """Token bucket bounding how long a container keeps bursting (upstream ``burstLimiter``).

    Capacity ``period * (cfsQuotaBurstPercent - 100)``; starts at a random fill in ``[0, capacity / 2)``; each
    call, at usage >= 100 % of the limit ``(usage - 100) * elapsed whole seconds`` tokens are consumed, below
    60 % ``(100 - usage) * elapsed`` saved; tokens stay within ``[-capacity, capacity]``; burst is allowed while
    tokens > 0. Forgotten after ``2 * period`` seconds unused.
    """

    def __init__(self, period_s: int, max_percent: int, now: float, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random()
        self._init(period_s, max_percent, now)

    def _init(self, period_s: int, max_percent: int, now: float) -> None:
        self.capacity = period_s * (max_percent - 100)
        self.tokens = int(self.capacity * (self.rng.random() / 2))
        self.last = now
        self.expire_s = 2 * period_s

    def update_if_changed(self, period_s: int, max_percent: int, now: float) -> None:
        """Start over when the config changed the capacity."""
        if period_s * (max_percent - 100) != self.capacity:
            self._init(period_s, max_percent, now)

    def allow(self, now: float, usage_percent: int) -> bool:
        """Account the time since the last call at ``usage_percent`` of the limit; True while tokens remain."""
        elapsed = int(now - self.last)
        if usage_percent >= LIMITER_CONSUME_PERCENT:
            self.tokens -= (usage_percent - 100) * elapsed
        elif usage_percent < LIMITER_SAVE_PERCENT:
            self.tokens += (100 - usage_percent) * elapsed
        self.tokens = max(min(self.tokens, self.capacity), -self.capacity)
        self.last = now
        return self.tokens > 0

    def expired(self, now: float) -> bool:
        """Unused for more than twice the period."""
        return now - self.last > self.expire_s


@dataclass(slots=True)
class _Sample:
    """A container's cpu.stat / cpu time at a round: throttled periods, periods, cpu ns, when."""

    nr_periods: int
    nr_throttled: int
    cpu_ns: int | None
    at: float


@dataclass(slots=True)
class BurstPlan:
    """One round's decisions.

    Attributes:
        state: the node's shared-pool state (None: no pod's policy scales quotas, so it was not computed).
        writes: ``cpu.cfs_burst_us`` and ``cpu.cfs_quota_us`` writes in the order to apply them.
        operations: ``pod key/container`` -> the final quota operation.
    """

    state: str | None = None
    writes: list[CgroupWrite] = field(default_factory=list)
    operations: dict[str, str] = field(default_factory=dict)


class CPUBurst:
    """The strategy; keeps each container's last ``cpu.stat`` sample and its limiter between rounds.

    Args:
        rng: randomness of the limiters' initial fill (tests pass a seeded one).
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random()
        self._samples: dict[str, _Sample] = {}
        self._limiters: dict[str, BurstLimiter] = {}
        #: cgroup files read every round, kept open (re-read with pread)
        self.files = OpenFiles()
        #: container id -> (quota file, cpu.stat, cpu usage file) paths
        self._dirs: dict[str, tuple[str, str, str]] = {}
        self._seen: set[str] = set()

    def state(self, ctx: QoSContext, threshold_percent: int) -> str:
        """The shared pool's state from averages over ``min(5 x interval, 10 s)``."""
        window = min(5 * ctx.interval, 10.0)
        start = ctx.now - window
        node = ctx.cache.aggregate(NODE_CPU, start, ctx.now)
        pods: dict[str, float] = {}
        for pod in ctx.pods:
            agg = ctx.cache.aggregate(pod_cpu_key(pod.uid), start, ctx.now)
            if agg is not None:
                pods[pod.uid] = agg.value
        return node_state(node.value if node else None, len(ctx.processors), ctx.pods, pods, threshold_percent)

    def plan(self, ctx: QoSContext) -> BurstPlan | None:
        """This round's writes; None when the NodeSLO has no ``cpuBurstStrategy``."""
        strategy = ctx.slo.cpu_burst_strategy
        if strategy is None:
            return None
        node_cfg = node_burst_config(strategy)
        threshold = strategy.share_pool_threshold_percent
        plan = BurstPlan()
        seen: set[str] = set()
        for pod in ctx.pods:
            if not pod.active or pod.cgroup_dir is None or not is_burstable(pod):
                continue
            cfg = pod_burst_config(pod, node_cfg)
            plan.writes += self._burst_writes(ctx, pod, cfg)
            if cfs_quota_burst_enabled(cfg.policy) and plan.state is None:  # only scaling needs the node's state
                plan.state = self.state(ctx, threshold if threshold is not None else 50)
            for c in pod.containers:
                if c.container_id:
                    seen.add(c.container_id)
                    plan.writes += self._quota_writes(ctx, pod, c, cfg, plan)
        for cid in [k for k in self._samples if k not in seen]:
            del self._samples[cid]
        if seen != self._seen:
            self._seen = seen
            self._dirs = {k: v for k, v in self._dirs.items() if k in seen}
            kept = {p for paths in self._dirs.values() for p in paths}
            self.files.retain(lambda path: path in kept)
        for cid in [k for k, lim in self._limiters.items() if lim.expired(ctx.now)]:
            del self._limiters[cid]
        return plan

    def _container_dir(self, ctx: QoSContext, pod: PodMeta, c: ContainerMeta) -> str | None:
        try:
            return ctx.layout.container_dir(pod.cgroup_dir or "", c.container_id)
        except CgroupPathError as exc:
            log.warning("pod %s container %s: %s; not touched", pod.key, c.name, exc)
            return None

    def _burst_writes(self, ctx: QoSContext, pod: PodMeta, cfg: BurstConfig) -> list[CgroupWrite]:
        writes: list[CgroupWrite] = []
        total = 0
        for c in pod.containers:
            if not c.container_id:
                continue
            cdir = self._container_dir(ctx, pod, c)
            if cdir is None:
                continue
            value = static_burst_us(c.limits.get("cpu", 0), cfg)
            total += value
            writes.append(CgroupWrite("cpu.cfs_burst_us", cdir, str(value), "CPUBurst"))
        assert pod.cgroup_dir is not None
        writes.append(CgroupWrite("cpu.cfs_burst_us", pod.cgroup_dir, str(total), "CPUBurst"))
        return writes

    def _paths(self, ctx: QoSContext, cid: str, cdir: str) -> tuple[str, str, str]:
        """``(quota file, cpu.stat, cpu usage file)`` of a container dir (v2: ``cpu.max``, ``cpu.stat`` twice).

        Raises:
            CgroupPathError: the dir leaves kubepods.
        """
        found = self._dirs.get(cid)
        if found is None:
            cpu = ctx.layout.dir_path("cpu", cdir)
            if ctx.layout.version == CgroupVersion.V1:
                usage = str(ctx.layout.dir_path("cpuacct", cdir) / "cpuacct.usage")
                found = (str(cpu / "cpu.cfs_quota_us"), str(cpu / "cpu.stat"), usage)
            else:
                found = (str(cpu / "cpu.max"), str(cpu / "cpu.stat"), str(cpu / "cpu.stat"))
            self._dirs[cid] = found
        return found

    def _read_quota(self, path: str) -> int:
        """A quota file's value in us, -1 unlimited. Raises OSError / ValueError."""
        text = self.files.read(path).decode().split(" ", 1)[0].strip()
        return -1 if text == "max" else int(text)

    def _throttled(
        self, ctx: QoSContext, cid: str, paths: tuple[str, str, str], usage: bool
    ) -> tuple[bool | None, float | None]:
        """``(throttled since the last round, cpu cores used since then)``; None where not known yet. The cpu
        time is read only when ``usage`` (a limiter needs it)."""
        periods = throttled = 0
        cpu_ns: int | None = None
        try:
            stat = self.files.read(paths[1])
            for line in stat.splitlines():
                key, _, value = line.partition(b" ")
                if key == b"nr_periods":
                    periods = int(value)
                elif key == b"nr_throttled":
                    throttled = int(value)
                elif key == b"usage_usec" and usage and paths[2] == paths[1]:
                    cpu_ns = int(value) * 1000
        except (OSError, ValueError):
            self._samples.pop(cid, None)
            return None, None
        if usage and paths[2] != paths[1]:
            try:
                cpu_ns = int(self.files.read(paths[2]))
            except (OSError, ValueError):
                cpu_ns = None
        prev = self._samples.get(cid)
        self._samples[cid] = _Sample(periods, throttled, cpu_ns, ctx.now)
        if prev is None:
            return None, None
        was_throttled = throttled > prev.nr_throttled if periods > prev.nr_periods else False
        used = None
        if cpu_ns is not None and prev.cpu_ns is not None and ctx.now > prev.at:
            used = (cpu_ns - prev.cpu_ns) / 1e9 / (ctx.now - prev.at)
        return was_throttled, used

    def _allowed_by_limiter(
        self, ctx: QoSContext, cid: str, cfg: BurstConfig, limit_milli: int, used: float | None
    ) -> bool:
        if cfg.cfs_quota_burst_period_seconds < 0:
            return True
        if cfg.cfs_quota_burst_percent < 100:
            return False
        limit = limit_milli / 1000
        usage = used if used is not None else limit
        limiter = self._limiters.get(cid)
        if limiter is None:
            limiter = self._limiters[cid] = BurstLimiter(
                cfg.cfs_quota_burst_period_seconds, cfg.cfs_quota_burst_percent, ctx.now, self.rng
            )
        else:
            limiter.update_if_changed(cfg.cfs_quota_burst_period_seconds, cfg.cfs_quota_burst_percent, ctx.now)
        return limiter.allow(ctx.now, int(usage / limit * 100))

    def _quota_writes(
        self, ctx: QoSContext, pod: PodMeta, c: ContainerMeta, cfg: BurstConfig, plan: BurstPlan
    ) -> list[CgroupWrite]:
        limit = c.limits.get("cpu", 0)
        base = batch_cfs_quota(limit)
        if base <= 0:
            return []
        cdir = self._container_dir(ctx, pod, c)
        if cdir is None or pod.cgroup_dir is None:
            return []
        try:
            paths = self._paths(ctx, c.container_id, cdir)
            current = self._read_quota(paths[0])
        except (OSError, ValueError, CgroupPathError):
            return []
        enabled = cfs_quota_burst_enabled(cfg.policy)
        limited = cfg.cfs_quota_burst_period_seconds >= 0
        throttled, used = self._throttled(ctx, c.container_id, paths, limited) if enabled or limited else (None, None)
        ceil = int(base * cfg.cfs_quota_burst_percent / 100) if cfg.cfs_quota_burst_percent > 100 else base
        allowed = self._allowed_by_limiter(ctx, c.container_id, cfg, limit, used)
        if not enabled:
            operation = RESET
        elif not allowed:
            operation = SCALE_DOWN
        elif throttled:
            operation = SCALE_UP
        else:
            operation = REMAIN
        final = change_by_node(plan.state or UNKNOWN, operation)
        plan.operations[f"{pod.key}/{c.name}"] = final
        target = quota_target(current, base, ceil, final)
        if target == current:
            return []
        delta = target - current
        container_write = CgroupWrite("cpu.cfs_quota_us", cdir, str(target), f"CFSQuotaBurst {final}")
        writes = [container_write]
        try:
            pod_quota = self._read_quota(str(ctx.layout.file_path("cpu.cfs_quota_us", pod.cgroup_dir)))
        except (OSError, ValueError, CgroupPathError):
            return []
        if pod_quota > 0:
            pod_write = CgroupWrite(
                "cpu.cfs_quota_us", pod.cgroup_dir, str(pod_quota + delta), f"CFSQuotaBurst {final}"
            )
            writes = [pod_write, container_write] if delta > 0 else [container_write, pod_write]
        return writes
