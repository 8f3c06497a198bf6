"""Where each watched kind lives in the Kubernetes API.

One table used by the Kubernetes source (list/watch paths), the file source (recognising
objects) and the manifests (CRDs). Group, version and plural are spelled exactly as upstream
(``apis/*/v1alpha1`` of koordinator-sh/koordinator and scheduler-plugins).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class KindInfo:
    """API coordinates of one kind.

    Attributes:
        kind: ``Node``, ``NodeMetric``, ...
        group: API group ("" for the core group).
        version: API version (``v1``, ``v1alpha1``).
        plural: resource name in URLs (``nodemetrics``).
        namespaced: whether objects live in a namespace.
    """

    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """``group/version``, or just ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def collection_path(self, namespace: str | None = None) -> str:
        """URL path of the collection, cluster-wide unless ``namespace`` is given."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace and self.namespaced:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"


KINDS: dict[str, KindInfo] = {
    k.kind: k
    for k in (
        KindInfo("Node", "", "v1", "nodes", False),
        KindInfo("Pod", "", "v1", "pods", True),
        KindInfo("ConfigMap", "", "v1", "configmaps", True),
        KindInfo("Namespace", "", "v1", "namespaces", False),
        KindInfo("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False),
        KindInfo("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True),
        KindInfo("NodeMetric", "slo.koordinator.sh", "v1alpha1", "nodemetrics", False),
        KindInfo("NodeSLO", "slo.koordinator.sh", "v1alpha1", "nodeslos", False),
        KindInfo("Reservation", "scheduling.koordinator.sh", "v1alpha1", "reservations", False),
        KindInfo("Device", "scheduling.koordinator.sh", "v1alpha1", "devices", False),
        KindInfo("PodMigrationJob", "scheduling.koordinator.sh", "v1alpha1", "podmigrationjobs", False),
        KindInfo("DrainNode", "scheduling.koordinator.sh", "v1alpha1", "drainnodes", False),
        KindInfo("ClusterColocationProfile", "config.koordinator.sh", "v1alpha1", "clustercolocationprofiles", False),
        KindInfo("ElasticQuota", "scheduling.sigs.k8s.io", "v1alpha1", "elasticquotas", True),
        KindInfo("PodGroup", "scheduling.sigs.k8s.io", "v1alpha1", "podgroups", True),
        KindInfo("NodeResourceTopology", "topology.node.k8s.io", "v1alpha1", "noderesourcetopologies", False),
    )
}


def object_key(obj: dict[str, Any]) -> str:
    """Cache key of an object: ``namespace/name`` for namespaced objects, ``name`` otherwise."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    name = meta.get("name", "")
    return f"{ns}/{name}" if ns else str(name)
