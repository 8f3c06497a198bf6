"""CoschedulingArgs: decoding, upstream defaults and validation.

Defaults follow ``pkg/scheduler/apis/config/v1/defaults.go`` (``SetDefaults_CoschedulingArgs``:
``defaultTimeout`` 600s, ``controllerWorkers`` 1, ``enablePreemption`` false, ``awareNetworkTopology``
false, ``defaultMatchPolicy`` ``once-satisfied``), validation ``ValidateCoschedulingArgs``
(``coeSchedulingArgs DefaultTimeoutSeconds invalid`` for a negative timeout,
``coeSchedulingArgs ControllerWorkers invalid`` below 1).

One field is koordinator-py's own: ``bindHTTPTimeout`` (Go duration, default ``16m``), the
``httpTimeout`` of kube-scheduler's bind-only extender entry (manifests/base/kube-scheduler-config.yaml).
A member waits at Permit inside its ``/bind`` request, so a gang whose wait is longer than this would be
abandoned by kube-scheduler first: such pods are refused at Filter, and a ``defaultTimeout`` above it
is warned about at start. ``enablePreemption``, ``awareNetworkTopology`` and ``skipCheckScheduleCycle``
are accepted for compatibility and have no effect here (no gang preemption or network topology is built).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.api import coscheduling as n
from app.framework.config import ArgsError, duration_arg

DEFAULT_TIMEOUT = 600.0
DEFAULT_CONTROLLER_WORKERS = 1
#: The bind entry's httpTimeout in the shipped kube-scheduler config.
DEFAULT_BIND_HTTP_TIMEOUT = 16 * 60.0

_FIELDS = {
    "defaultTimeout",
    "controllerWorkers",
    "skipCheckScheduleCycle",
    "enablePreemption",
    "awareNetworkTopology",
    "defaultMatchPolicy",
    "bindHTTPTimeout",
}


@dataclass(frozen=True, slots=True)
class CoschedulingArgs:
    """Plugin args after defaulting.

    Attributes:
        default_timeout: seconds a gang waits at Permit when neither its PodGroup nor its pods say.
        controller_workers: accepted and validated as upstream (the status controller is one loop here).
        default_match_policy: the match policy of a gang without a valid one.
        bind_http_timeout: seconds kube-scheduler waits for one ``/bind`` answer (see the module docstring).
    """

    default_timeout: float = DEFAULT_TIMEOUT
    controller_workers: int = DEFAULT_CONTROLLER_WORKERS
    default_match_policy: str = n.MATCH_POLICY_ONCE_SATISFIED
    bind_http_timeout: float = DEFAULT_BIND_HTTP_TIMEOUT


def _bool(raw: dict[str, Any], key: str) -> None:
    value = raw.get(key)
    if value is not None and not isinstance(value, bool):
        raise ArgsError(key, f"expected true or false, got {value!r}")


def decode_args(raw: dict[str, Any]) -> CoschedulingArgs:
    """Decode ``pluginConfig[].args`` of Coscheduling, apply upstream defaults, validate.

    Raises:
        ArgsError: unknown field, wrong type, or a value upstream's validation rejects (its message).
    """
    extra = set(raw) - _FIELDS
    if extra:
        raise ArgsError(sorted(extra)[0], "unknown field")
    for key in ("skipCheckScheduleCycle", "enablePreemption", "awareNetworkTopology"):
        _bool(raw, key)
    timeout = duration_arg(raw, "defaultTimeout", DEFAULT_TIMEOUT)
    if timeout < 0:
        raise ArgsError("defaultTimeout", "coeSchedulingArgs DefaultTimeoutSeconds invalid")
    workers = raw.get("controllerWorkers", DEFAULT_CONTROLLER_WORKERS)
    if isinstance(workers, bool) or not isinstance(workers, int):
        raise ArgsError("controllerWorkers", f"expected an integer, got {workers!r}")
    if workers < 1:
        raise ArgsError("controllerWorkers", "coeSchedulingArgs ControllerWorkers invalid")
    policy = raw.get("defaultMatchPolicy") or n.MATCH_POLICY_ONCE_SATISFIED
    if policy not in n.MATCH_POLICIES:
        raise ArgsError("defaultMatchPolicy", f"expected one of {', '.join(n.MATCH_POLICIES)}, got {policy!r}")
    bind = duration_arg(raw, "bindHTTPTimeout", DEFAULT_BIND_HTTP_TIMEOUT)
    if bind <= 0:
        raise ArgsError("bindHTTPTimeout", f"must be positive, got {raw.get('bindHTTPTimeout')!r}")
    return CoschedulingArgs(timeout, workers, policy, bind)
