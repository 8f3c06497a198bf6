"""The two pod subresource requests the clients POST: a ``Binding`` and a policy/v1 ``Eviction``.

Both carry the pod's uid as a precondition, so the API server refuses them (409 Conflict) when the
pod was deleted and recreated under the same name. One definition serves the scheduler's bind, the
service's evictions (ElasticQuota revocation) and the node agent's evictor.
"""

from __future__ import annotations

from typing import Any

__all__ = ["binding", "eviction"]


def binding(namespace: str, name: str, uid: str, node: str) -> tuple[str, dict[str, Any]]:
    """(path, body) of the ``Binding`` of pod ``namespace/name`` (uid ``uid``) to ``node``.

    Follows kube-scheduler's DefaultBinder (``pods/binding`` with ``metadata.uid``). The answer is a
    ``Status`` (201); a pod already bound answers 409 Conflict, a missing pod 404 NotFound.
    """
    path = f"/api/v1/namespaces/{namespace}/pods/{name}/binding"
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    return path, body


def eviction(namespace: str, name: str, uid: str) -> tuple[str, dict[str, Any]]:
    """(path, body) of the policy/v1 ``Eviction`` of pod ``namespace/name``.

    ``uid`` becomes ``deleteOptions.preconditions.uid`` (no precondition when empty), as koordlet's
    evictor and the descheduler's send it. The API server answers 201, 429 TooManyRequests when a
    PodDisruptionBudget blocks the eviction, 404 NotFound when the pod is gone, 409 Conflict when
    the uid no longer matches.
    """
    path = f"/api/v1/namespaces/{namespace}/pods/{name}/eviction"
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"preconditions": {"uid": uid}} if uid else {},
    }
    return path, body
