"""CRI requests to hook requests and hook answers back into CRI requests (upstream
``pkg/runtimeproxy/resexecutor/cri/{pod,container,utils}.go``).

Per intercepted call an executor (:class:`PodResourceExecutor` for RunPodSandbox / StopPodSandbox,
:class:`ContainerResourceExecutor` for the container calls):

1. ``parse_request`` builds the hook request (from the CRI request, else from the :class:`~runtimeproxy.store.Store`)
   and says whether to call the hook servers (not for the hook server's own pods, labelled
   ``--runtime-hook-server-key=--runtime-hook-server-val``);
2. ``update_request`` merges the hook server's answer into the CRI request, as upstream:
   annotations and labels merged (the answer wins), cgroup parent replaced when set, container envs replaced
   by the answer's when it has any (kept in the request's order, new keys appended sorted), and resources by
   upstream's ``updateResource`` (:func:`update_resource`);
3. ``checkpoint`` remembers the sandbox / container under the id the backend answered, and
   ``delete_checkpoint`` forgets it after StopPodSandbox / StopContainer.

One departure: CreateContainer for a sandbox the store does not know (a proxy restarted before the backend
answered its list) builds the pod part from the request's own ``sandbox_config``, where upstream skips the
hooks for that container.

Raises (``parse_request``): :class:`ExecutorError` when the id is unknown to the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum

from app.api.runtime.config import RuntimeRequestPath
from app.api.runtime.v1alpha1 import api_pb2 as hookapi
from runtimeproxy.cri.v1 import api_pb2 as cri
from runtimeproxy.store import Store


class ExecutorError(ValueError):
    """The hook request cannot be built (an id the store does not know, a request of the wrong type)."""


class CallHookOperation(Enum):
    """Whether to call the hook servers for this request (``CallHookPluginOperation``)."""

    SHOULD_CALL = "ShouldCallHookPlugin"
    SHOULD_NOT_CALL_ALWAYS = "ShouldNotCallHookPluginAlways"


def to_hook_resources(r: cri.LinuxContainerResources) -> hookapi.LinuxContainerResources:
    """CRI ``LinuxContainerResources`` -> the hook API's (``transferToKoordResources``)."""
    out = hookapi.LinuxContainerResources(
        cpu_period=r.cpu_period,
        cpu_quota=r.cpu_quota,
        cpu_shares=r.cpu_shares,
        memory_limit_in_bytes=r.memory_limit_in_bytes,
        oom_score_adj=r.oom_score_adj,
        cpuset_cpus=r.cpuset_cpus,
        cpuset_mems=r.cpuset_mems,
        unified=dict(r.unified),
        memory_swap_limit_in_bytes=r.memory_swap_limit_in_bytes,
    )
    for h in r.hugepage_limits:
        out.hugepage_limits.add(page_size=h.page_size, limit=h.limit)
    return out


def to_cri_resources(r: hookapi.LinuxContainerResources, into: cri.LinuxContainerResources) -> None:
    """Write the hook API's resources into a CRI ``LinuxContainerResources`` (``transferToCRIResources``); the
    CRI-only fields (``devices``) are kept."""
    into.cpu_period = r.cpu_period
    into.cpu_quota = r.cpu_quota
    into.cpu_shares = r.cpu_shares
    into.memory_limit_in_bytes = r.memory_limit_in_bytes
    into.oom_score_adj = r.oom_score_adj
    into.cpuset_cpus = r.cpuset_cpus
    into.cpuset_mems = r.cpuset_mems
    into.unified.clear()
    into.unified.update(r.unified)
    into.memory_swap_limit_in_bytes = r.memory_swap_limit_in_bytes
    del into.hugepage_limits[:]
    for h in r.hugepage_limits:
        into.hugepage_limits.add(page_size=h.page_size, limit=h.limit)


def update_resource(a: hookapi.LinuxContainerResources, b: hookapi.LinuxContainerResources) -> None:
    """Merge a hook answer ``b`` into ``a`` in place, as upstream ``updateResource``: period, shares, memory and swap
    limits when > 0, quota when != 0 (-1 is valid), oom_score_adj when within -1000..1000, cpuset cpus and
    mems always (a hook server answers with the request's values plus its changes), unified merged."""
    if b.cpu_period > 0:
        a.cpu_period = b.cpu_period
    if b.cpu_quota != 0:
        a.cpu_quota = b.cpu_quota
    if b.cpu_shares > 0:
        a.cpu_shares = b.cpu_shares
    if b.memory_limit_in_bytes > 0:
        a.memory_limit_in_bytes = b.memory_limit_in_bytes
    if -1000 <= b.oom_score_adj <= 1000:
        a.oom_score_adj = b.oom_score_adj
    a.cpuset_cpus = b.cpuset_cpus
    a.cpuset_mems = b.cpuset_mems
    a.unified.update(b.unified)
    if b.memory_swap_limit_in_bytes > 0:
        a.memory_swap_limit_in_bytes = b.memory_swap_limit_in_bytes


def update_resource_by_update_request(a: hookapi.LinuxContainerResources, b: hookapi.LinuxContainerResources) -> None:
    """Merge an UpdateContainerResources request ``b`` into the remembered ``a`` in place
    (``updateResourceByUpdateContainerResourceRequest``): like :func:`update_resource` but cpusets only when set
    and oom_score_adj never."""
    if b.cpu_period > 0:
        a.cpu_period = b.cpu_period
    if b.cpu_quota != 0:
        a.cpu_quota = b.cpu_quota
    if b.cpu_shares > 0:
        a.cpu_shares = b.cpu_shares
    if b.memory_limit_in_bytes > 0:
        a.memory_limit_in_bytes = b.memory_limit_in_bytes
    if b.cpuset_cpus:
        a.cpuset_cpus = b.cpuset_cpus
    if b.cpuset_mems:
        a.cpuset_mems = b.cpuset_mems
    a.unified.update(b.unified)
    if b.memory_swap_limit_in_bytes > 0:
        a.memory_swap_limit_in_bytes = b.memory_swap_limit_in_bytes


def envs_map(envs: Iterable[cri.KeyValue]) -> dict[str, str]:
    """CRI env list (values are bytes) -> map of text (``transferToKoordContainerEnvs``); a repeated key keeps its
    last value; bytes that are not UTF-8 are shown with U+FFFD (the hook API's strings must be UTF-8)."""
    return {kv.key: kv.value.decode("utf-8", "replace") for kv in envs}


def replace_envs(config: cri.ContainerConfig, envs: Mapping[str, str]) -> None:
    """Make ``config.envs`` exactly ``envs`` (upstream replaces the list with the answer's map), keeping the order
    of the keys already there and appending new keys sorted (a Go map has no order; sorted keeps the request
    reproducible)."""
    old = [kv.key for kv in config.envs]
    raw = {kv.key: kv.value for kv in config.envs}
    seen: set[str] = set()
    order: list[str] = []
    for k in old:
        if k in envs and k not in seen:
            seen.add(k)
            order.append(k)
    order += sorted(k for k in envs if k not in seen)
    del config.envs[:]
    for k in order:
        value = envs[k]
        # a value the hook server left alone keeps its original bytes (even when they are not UTF-8)
        same = k in raw and raw[k].decode("utf-8", "replace") == value
        config.envs.add(key=k, value=raw[k] if same else value.encode())


def _is_hook_server_pod(labels: Mapping[str, str], key: str, val: str) -> bool:
    return labels.get(key) == val


class PodResourceExecutor:
    """RunPodSandbox / StopPodSandbox (upstream ``PodResourceExecutor``).

    Args:
        store: the proxy's memory of sandboxes and containers.
        skip_key / skip_val: the hook server's own pods carry this label pair.
    """

    def __init__(self, store: Store, skip_key: str, skip_val: str) -> None:
        self.store = store
        self.skip = (skip_key, skip_val)
        self.info = hookapi.PodSandboxHookRequest()

    def meta_info(self) -> str:
        """``name/uid`` for log lines."""
        return f"{self.info.pod_meta.name}/{self.info.pod_meta.uid}"

    def hook_request(self) -> hookapi.PodSandboxHookRequest:
        """The request for the hook server."""
        return self.info

    def parse_request(self, path: RuntimeRequestPath, request: object) -> CallHookOperation:
        """Build the hook request.

        Raises:
            ExecutorError: StopPodSandbox of a sandbox the store does not know; a request of another type.
        """
        if path == RuntimeRequestPath.RUN_POD_SANDBOX and isinstance(request, cri.RunPodSandboxRequest):
            self.info = sandbox_hook_request(request.config, request.runtime_handler)
        elif path == RuntimeRequestPath.STOP_POD_SANDBOX and isinstance(request, cri.StopPodSandboxRequest):
            info = self.store.pod(request.pod_sandbox_id)
            if info is None:
                raise ExecutorError(f"no pod item related to {request.pod_sandbox_id}")
            self.info = info
        else:
            raise ExecutorError(f"{path}: unexpected request {type(request).__name__}")
        if _is_hook_server_pod(self.info.labels, *self.skip):
            return CallHookOperation.SHOULD_NOT_CALL_ALWAYS
        return CallHookOperation.SHOULD_CALL

    def update_request(self, response: hookapi.PodSandboxHookResponse, request: object) -> None:
        """Merge the answer into the remembered info and, for RunPodSandbox, into the CRI request."""
        self.info.annotations.update(response.annotations)
        self.info.labels.update(response.labels)
        if response.cgroup_parent:
            self.info.cgroup_parent = response.cgroup_parent
        if isinstance(request, cri.RunPodSandboxRequest):
            request.config.annotations.update(self.info.annotations)
            request.config.labels.update(self.info.labels)
            if self.info.cgroup_parent:
                request.config.linux.cgroup_parent = self.info.cgroup_parent

    def checkpoint(self, response: object) -> None:
        """Remember the sandbox under the id RunPodSandbox answered."""
        if isinstance(response, cri.RunPodSandboxResponse) and response.pod_sandbox_id:
            self.store.write_pod(response.pod_sandbox_id, self.info)

    def delete_checkpoint(self, request: object) -> None:
        """Forget the sandbox after StopPodSandbox."""
        if isinstance(request, cri.StopPodSandboxRequest):
            self.store.delete_pod(request.pod_sandbox_id)


def sandbox_hook_request(config: cri.PodSandboxConfig, runtime_handler: str = "") -> hookapi.PodSandboxHookRequest:
    """The hook request of a sandbox config (metadata, labels, annotations, cgroup parent, overhead, resources)."""
    md = config.metadata
    out = hookapi.PodSandboxHookRequest(
        pod_meta=hookapi.PodSandboxMetadata(name=md.name, uid=md.uid, namespace=md.namespace, attempt=md.attempt),
        runtime_handler=runtime_handler,
        labels=dict(config.labels),
        annotations=dict(config.annotations),
        cgroup_parent=config.linux.cgroup_parent,
    )
    if config.linux.HasField("overhead"):
        out.overhead.CopyFrom(to_hook_resources(config.linux.overhead))
    if config.linux.HasField("resources"):
        out.resources.CopyFrom(to_hook_resources(config.linux.resources))
    return out


class ContainerResourceExecutor:
    """CreateContainer / StartContainer / UpdateContainerResources / StopContainer (upstream
    ``ContainerResourceExecutor``). Args as :class:`PodResourceExecutor`."""

    def __init__(self, store: Store, skip_key: str, skip_val: str) -> None:
        self.store = store
        self.skip = (skip_key, skip_val)
        self.info = hookapi.ContainerResourceHookRequest()

    def meta_info(self) -> str:
        """``pod(name/uid)container(name)`` for log lines."""
        return f"pod({self.info.pod_meta.name}/{self.info.pod_meta.uid})container({self.info.container_meta.name})"

    def hook_request(self) -> hookapi.ContainerResourceHookRequest:
        """The request for the hook server."""
        return self.info

    def _load(self, container_id: str, stage: str) -> None:
        info = self.store.container(container_id)
        if info is None:
            raise ExecutorError(f"fail to load container({container_id}) from store during {stage}")
        self.info = info

    def parse_request(self, path: RuntimeRequestPath, request: object) -> CallHookOperation:
        """Build the hook request.

        Raises:
            ExecutorError: a container id the store does not know; a request of another type.
        """
        if path == RuntimeRequestPath.CREATE_CONTAINER and isinstance(request, cri.CreateContainerRequest):
            pod = self.store.pod(request.pod_sandbox_id)
            if pod is None:
                pod = sandbox_hook_request(request.sandbox_config)
            cfg = request.config
            self.info = hookapi.ContainerResourceHookRequest(
                pod_meta=pod.pod_meta,
                container_meta=hookapi.ContainerMetadata(name=cfg.metadata.name, attempt=cfg.metadata.attempt),
                container_annotations=dict(cfg.annotations),
                pod_annotations=dict(pod.annotations),
                pod_labels=dict(pod.labels),
                pod_cgroup_parent=request.sandbox_config.linux.cgroup_parent,
                container_envs=envs_map(cfg.envs),
            )
            if pod.HasField("resources"):
                self.info.pod_resources.CopyFrom(pod.resources)
            self.info.container_resources.CopyFrom(to_hook_resources(cfg.linux.resources))
        elif path == RuntimeRequestPath.START_CONTAINER and isinstance(request, cri.StartContainerRequest):
            self._load(request.container_id, "StartContainer")
        elif path == RuntimeRequestPath.UPDATE_CONTAINER_RESOURCES and isinstance(
            request, cri.UpdateContainerResourcesRequest
        ):
            self._load(request.container_id, "UpdateContainerResource")
            update_resource_by_update_request(self.info.container_resources, to_hook_resources(request.linux))
        elif path == RuntimeRequestPath.STOP_CONTAINER and isinstance(request, cri.StopContainerRequest):
            self._load(request.container_id, "StopContainer")
        else:
            raise ExecutorError(f"{path}: unexpected request {type(request).__name__}")
        if _is_hook_server_pod(self.info.pod_labels, *self.skip):
            return CallHookOperation.SHOULD_NOT_CALL_ALWAYS
        return CallHookOperation.SHOULD_CALL

    def update_request(self, response: hookapi.ContainerResourceHookResponse, request: object) -> None:
        """Merge the answer into the remembered info and into CreateContainer / UpdateContainerResources."""
        self.info.container_annotations.update(response.container_annotations)
        if response.HasField("container_resources"):
            update_resource(self.info.container_resources, response.container_resources)
        if response.pod_cgroup_parent:
            self.info.pod_cgroup_parent = response.pod_cgroup_parent
        if response.container_envs:
            self.info.container_envs.clear()
            self.info.container_envs.update(response.container_envs)
        if isinstance(request, cri.CreateContainerRequest):
            request.config.annotations.update(self.info.container_annotations)
            to_cri_resources(self.info.container_resources, request.config.linux.resources)
            if self.info.pod_cgroup_parent:
                request.sandbox_config.linux.cgroup_parent = self.info.pod_cgroup_parent
            if response.container_envs:
                replace_envs(request.config, self.info.container_envs)
        elif isinstance(request, cri.UpdateContainerResourcesRequest):
            request.annotations.update(self.info.container_annotations)
            to_cri_resources(self.info.container_resources, request.linux)

    def checkpoint(self, response: object) -> None:
        """Remember the container under the id CreateContainer answered (pod part and final resources)."""
        if isinstance(response, cri.CreateContainerResponse) and response.container_id:
            self.info.container_meta.id = response.container_id
            self.store.write_container(response.container_id, self.info)

    def delete_checkpoint(self, request: object) -> None:
        """Forget the container after StopContainer."""
        if isinstance(request, cri.StopContainerRequest):
            self.store.delete_container(request.container_id)
