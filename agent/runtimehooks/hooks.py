"""The hooks, on the agent's own strategies (upstream ``runtimehooks/hooks/{gpu,cpuset,batchresource,
groupidentity}`` and the memory QoS of ``cgreconcile``).

PreRunPodSandbox (:func:`pre_run_pod_sandbox`): the pod's cgroup exists (kubelet makes it before RunPodSandbox),
so the pod-level values are written there through the executor: batch resources of a BE pod (cpu.shares,
cfs quota, memory limit), memory QoS (memory.min/low/high, when its class enables it), group identity
(``cpu.bvt_warp_ns``, when the kernel has it) and ``cpu.cfs_quota_us = -1`` for a pod with an exclusive cpuset.

PreCreateContainer / PreUpdateContainerResources (:func:`container_resources`): the container's resources in the
answer: ``cpuset_cpus`` (LSE/LSR cpus from resource-status with ``cpu_quota = -1``, the shared pools for LS
and others as :func:`agent.qos.cpuset.pod_cpuset` decides, without the cpusets of pods the pod source lists now:
an LSR pod admitted together with this one is not yet in the published pools), and for a BE pod
``cpu_shares`` / ``cpu_quota`` / ``memory_limit_in_bytes`` from its batch resources; PreCreateContainer also
sets the GPU env (:func:`gpu_env`).

GPU: ``NVIDIA_VISIBLE_DEVICES`` lists the allocated GPUs' UUIDs (the ``id`` of each ``device-allocated`` entry);
upstream lists minors, but the NVIDIA runtime reads numbers as nvidia-smi indices, which are not always the
``/dev/nvidiaN`` minors, while a UUID names one GPU. An entry without an id falls back to the minors.
RDMA: upstream's rdma hook adds device nodes, which RuntimeHookService cannot carry (no device field; upstream
adds them through NRI only), so through the proxy nothing is added for RDMA.

Every hook fails soft: a malformed annotation is logged and that hook skipped; the others still answer.
"""

from __future__ import annotations

import logging

from agent.executor import CgroupExecutor, CgroupWrite
from agent.qos.cpuset import REASON_UNSET_QUOTA, ResourceStatusError, parse_resource_status, pod_cpuset
from agent.qos.isolation import (
    batch_cfs_quota,
    batch_cpu_shares,
    batch_writes,
    group_identity_value,
    memory_qos_writes,
)
from agent.runtimehooks.protocol import HookEnv, allocated_gpus
from agent.states.pods import PodMeta
from app.api.koordext import BATCH_CPU, BATCH_MEMORY, QoSClass
from app.api.runtime.v1alpha1 import api_pb2 as hookapi
from app.api.topology import ANNOTATION_RESOURCE_STATUS, format_cpuset

log = logging.getLogger("agent.runtimehooks")

#: The env the NVIDIA container runtime reads (``GpuAllocEnv``).
GPU_ALLOC_ENV = "NVIDIA_VISIBLE_DEVICES"


def gpu_env(pod: PodMeta) -> dict[str, str]:
    """``{NVIDIA_VISIBLE_DEVICES: "GPU-uuid,..."}`` for a pod with allocated GPUs, else ``{}`` (logged when the
    annotation is malformed)."""
    try:
        gpus = allocated_gpus(pod.annotations)
    except ValueError as exc:
        log.warning("pod %s: no GPU env: %s", pod.key, exc)
        return {}
    if not gpus:
        return {}
    if all(uuid for _, uuid in gpus):
        return {GPU_ALLOC_ENV: ",".join(uuid for _, uuid in gpus)}
    return {GPU_ALLOC_ENV: ",".join(str(minor) for minor, _ in gpus)}


def container_resources(
    env: HookEnv, pod: PodMeta, container: str, res: hookapi.LinuxContainerResources, since: float
) -> list[str]:
    """Set the container's cpuset and batch resources in ``res`` (in place); returns what was set, for the log.

    A container given a shared pool gets it without the exclusive cpusets of the pods the pod source lists at
    or after ``since`` (``time.monotonic()`` of the hook's start; :meth:`HookEnv.fresh_pods`)."""
    done: list[str] = []
    try:
        rule = env.cpuset_rule()
        if (
            rule is not None
            and not pod.is_be
            and not parse_resource_status(pod.annotations.get(ANNOTATION_RESOURCE_STATUS)).cpuset
        ):
            rule = rule.without(env.fresh_pods(since).exclusive_cpus)
        cpus, unset_quota = pod_cpuset(pod, rule)
    except ResourceStatusError as exc:
        log.warning("pod %s: malformed %s, no cpuset at creation: %s", pod.key, ANNOTATION_RESOURCE_STATUS, exc)
        cpus, unset_quota = None, False
    if cpus and not pod.is_be:
        res.cpuset_cpus = format_cpuset(cpus)
        done.append(f"cpuset {res.cpuset_cpus}")
        if unset_quota:
            res.cpu_quota = -1
            done.append("cfs quota -1")
    if pod.qos_raw == QoSClass.BE:
        spec = next((c for c in pod.containers if c.name == container), None)
        if spec is not None:  # upstream: no extended resource spec -> keep the original values
            res.cpu_shares = batch_cpu_shares(spec.requests.get(BATCH_CPU, 0))
            res.cpu_quota = batch_cfs_quota(spec.limits.get(BATCH_CPU))
            memory = spec.limits.get(BATCH_MEMORY, 0)
            if memory > 0:
                res.memory_limit_in_bytes = memory
            done.append(f"batch shares {res.cpu_shares} quota {res.cpu_quota} memory {memory or 'unlimited'}")
    return done


def pod_writes(env: HookEnv, pod: PodMeta, now: float) -> list[CgroupWrite]:
    """The pod-level writes of PreRunPodSandbox (see the module docstring)."""
    if pod.cgroup_dir is None:
        return []
    ctx = env.context(now)
    writes = [w for w in batch_writes(ctx, pod) if w.rel_dir == pod.cgroup_dir]
    if pod.requests:
        writes += memory_qos_writes(ctx, pod)
    if env.group_identity_supported(ctx):
        qos = pod.qos.value if pod.qos != QoSClass.LSE else "LSR"
        writes.append(
            CgroupWrite("cpu.bvt_warp_ns", pod.cgroup_dir, str(group_identity_value(ctx, qos)), "groupIdentity")
        )
    try:
        if parse_resource_status(pod.annotations.get(ANNOTATION_RESOURCE_STATUS)).cpuset:
            writes.append(CgroupWrite("cpu.cfs_quota_us", pod.cgroup_dir, "-1", REASON_UNSET_QUOTA))
    except ResourceStatusError:
        pass  # logged by the container hook
    return writes


def pre_run_pod_sandbox(env: HookEnv, executor: CgroupExecutor, pod: PodMeta, now: float) -> int:
    """Write the pod-level values; returns how many files were written."""
    writes = pod_writes(env, pod, now)
    return executor.update_batch(writes) if writes else 0
