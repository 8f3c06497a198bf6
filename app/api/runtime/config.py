"""Hook types, request paths, failure policies and the hook server registration file (upstream
``pkg/runtimeproxy/config/config.go``), shared by koord runtime-proxy (which reads registrations) and
koord agent (which writes its own, ``koordlet.json``, as koordlet's ``proxyserver.Register``).

A hook server registers by writing a JSON file into the config folder (default ``/etc/runtime/hookserver.d``)::

    {"remote-endpoint": "/var/run/koordlet/koordlet.sock", "failure-policy": "Ignore",
     "runtime-hooks": ["PreRunPodSandbox", "PreCreateContainer", ...]}

Raises: :class:`HookConfigError` from :func:`parse_hook_config`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum


class FailurePolicy(StrEnum):
    """What a failed hook call does to the CRI call: ``Fail`` returns the error to kubelet; ``Ignore`` and
    none (``""``) send the request on unchanged (upstream's default)."""

    FAIL = "Fail"
    IGNORE = "Ignore"
    NONE = ""


class RuntimeHookType(StrEnum):
    """The hooks of RuntimeHookService, by upstream's names."""

    PRE_RUN_POD_SANDBOX = "PreRunPodSandbox"
    POST_STOP_POD_SANDBOX = "PostStopPodSandbox"
    PRE_CREATE_CONTAINER = "PreCreateContainer"
    PRE_START_CONTAINER = "PreStartContainer"
    POST_START_CONTAINER = "PostStartContainer"
    PRE_UPDATE_CONTAINER_RESOURCES = "PreUpdateContainerResources"
    POST_STOP_CONTAINER = "PostStopContainer"

    @property
    def stage(self) -> HookStage:
        """``PreHook`` or ``PostHook`` from the name's prefix (``HookStage``)."""
        return HookStage.PRE if self.value.startswith("Pre") else HookStage.POST

    @property
    def rpc(self) -> str:
        """The RuntimeHookService method: ``PreCreateContainerHook``."""
        return self.value + "Hook"


class RuntimeRequestPath(StrEnum):
    """The intercepted CRI calls (``RuntimeRequestPath``)."""

    RUN_POD_SANDBOX = "RunPodSandbox"
    STOP_POD_SANDBOX = "StopPodSandbox"
    CREATE_CONTAINER = "CreateContainer"
    START_CONTAINER = "StartContainer"
    UPDATE_CONTAINER_RESOURCES = "UpdateContainerResources"
    STOP_CONTAINER = "StopContainer"


class HookStage(StrEnum):
    """Before (``PreHook``) or after (``PostHook``) the backend call."""

    PRE = "PreHook"
    POST = "PostHook"


#: Which hooks occur on which CRI call (``RuntimeHookType.OccursOn``).
OCCURS_ON: dict[RuntimeHookType, RuntimeRequestPath] = {
    RuntimeHookType.PRE_RUN_POD_SANDBOX: RuntimeRequestPath.RUN_POD_SANDBOX,
    RuntimeHookType.POST_STOP_POD_SANDBOX: RuntimeRequestPath.STOP_POD_SANDBOX,
    RuntimeHookType.PRE_CREATE_CONTAINER: RuntimeRequestPath.CREATE_CONTAINER,
    RuntimeHookType.PRE_START_CONTAINER: RuntimeRequestPath.START_CONTAINER,
    RuntimeHookType.POST_START_CONTAINER: RuntimeRequestPath.START_CONTAINER,
    RuntimeHookType.PRE_UPDATE_CONTAINER_RESOURCES: RuntimeRequestPath.UPDATE_CONTAINER_RESOURCES,
    RuntimeHookType.POST_STOP_CONTAINER: RuntimeRequestPath.STOP_CONTAINER,
}


class HookConfigError(ValueError):
    """A registration file is not the expected JSON; the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class RuntimeHookConfig:
    """One hook server's registration (``RuntimeHookConfig``).

    Attributes:
        remote_endpoint: its unix socket path.
        failure_policy: what a failed call does.
        runtime_hooks: the hooks it serves.
        source: the file it came from.
    """

    remote_endpoint: str
    failure_policy: FailurePolicy
    runtime_hooks: tuple[RuntimeHookType, ...]
    source: str = ""

    def hook_for(self, path: RuntimeRequestPath, stage: HookStage) -> RuntimeHookType | None:
        """The first registered hook that occurs on ``path`` at ``stage``, else None."""
        for hook in self.runtime_hooks:
            if OCCURS_ON[hook] == path and hook.stage == stage:
                return hook
        return None


def parse_hook_config(text: str, source: str = "") -> RuntimeHookConfig:
    """A registration from its JSON text.

    Raises:
        HookConfigError: not a JSON object, no ``remote-endpoint``, an unknown failure policy or hook type.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise HookConfigError(f"{source}: invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise HookConfigError(f"{source}: expected a JSON object")
    endpoint = data.get("remote-endpoint")
    if not isinstance(endpoint, str) or not endpoint:
        raise HookConfigError(f"{source}: remote-endpoint: expected a socket path")
    try:
        policy = FailurePolicy(data.get("failure-policy") or "")
    except ValueError:
        raise HookConfigError(
            f"{source}: failure-policy: expected Fail or Ignore, got {data.get('failure-policy')!r}"
        ) from None
    hooks_raw = data.get("runtime-hooks") or []
    if not isinstance(hooks_raw, list):
        raise HookConfigError(f"{source}: runtime-hooks: expected a list")
    hooks: list[RuntimeHookType] = []
    for h in hooks_raw:
        try:
            hooks.append(RuntimeHookType(h))
        except ValueError:
            raise HookConfigError(
                f"{source}: runtime-hooks: unknown hook {h!r} (one of {[t.value for t in RuntimeHookType]})"
            ) from None
    return RuntimeHookConfig(endpoint, policy, tuple(hooks), source)


def hook_config_json(endpoint: str, policy: FailurePolicy, hooks: list[RuntimeHookType]) -> str:
    """The registration file a hook server writes (``server.Register``), indented as upstream."""
    return json.dumps(
        {"remote-endpoint": endpoint, "failure-policy": policy.value, "runtime-hooks": [h.value for h in hooks]},
        indent="\t",
    )
