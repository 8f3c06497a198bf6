"""What the proxy remembers of sandboxes and containers between CRI calls (upstream ``pkg/runtimeproxy/store``).

StartContainer, UpdateContainerResources and StopContainer carry only a container id, StopPodSandbox only a
sandbox id: the hook request for them is built from what RunPodSandbox / CreateContainer carried, kept here by
id. Kept in memory; at start the proxy fills it from the backend's ListPodSandbox / ListContainers
(``failOver``), so a restarted proxy still knows the running pods.
"""

from __future__ import annotations

import threading
from typing import TypeVar

from app.api.runtime.v1alpha1 import api_pb2 as hookapi

_M = TypeVar("_M", hookapi.PodSandboxHookRequest, hookapi.ContainerResourceHookRequest)


class Store:
    """Sandbox and container hook requests by id; thread-safe; entries are copies (callers may mutate theirs)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[str, hookapi.PodSandboxHookRequest] = {}
        self._containers: dict[str, hookapi.ContainerResourceHookRequest] = {}

    @staticmethod
    def _copy(msg: _M) -> _M:
        out = type(msg)()
        out.CopyFrom(msg)
        return out

    def write_pod(self, sandbox_id: str, info: hookapi.PodSandboxHookRequest) -> None:
        """Remember a sandbox (``WritePodSandboxInfo``)."""
        with self._lock:
            self._pods[sandbox_id] = self._copy(info)

    def pod(self, sandbox_id: str) -> hookapi.PodSandboxHookRequest | None:
        """A copy of a remembered sandbox, None when unknown (``GetPodSandboxInfo``)."""
        with self._lock:
            info = self._pods.get(sandbox_id)
            return self._copy(info) if info is not None else None

    def delete_pod(self, sandbox_id: str) -> None:
        """Forget a sandbox (``DeletePodSandboxInfo``); unknown ids are ignored."""
        with self._lock:
            self._pods.pop(sandbox_id, None)

    def write_container(self, container_id: str, info: hookapi.ContainerResourceHookRequest) -> None:
        """Remember a container (``WriteContainerInfo``)."""
        with self._lock:
            self._containers[container_id] = self._copy(info)

    def container(self, container_id: str) -> hookapi.ContainerResourceHookRequest | None:
        """A copy of a remembered container, None when unknown (``GetContainerInfo``)."""
        with self._lock:
            info = self._containers.get(container_id)
            return self._copy(info) if info is not None else None

    def delete_container(self, container_id: str) -> None:
        """Forget a container (``DeleteContainerInfo``); unknown ids are ignored."""
        with self._lock:
            self._containers.pop(container_id, None)

    def sizes(self) -> tuple[int, int]:
        """``(sandboxes, containers)`` remembered."""
        with self._lock:
            return len(self._pods), len(self._containers)
