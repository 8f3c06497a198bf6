"""ClusterColocationProfile: webhook rules that turn matching pods into colocated pods.

Group ``config.koordinator.sh/v1alpha1``. Follows upstream's
``apis/config/v1alpha1/cluster_colocation_profile_types.go``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from app.api.kinds import KINDS
from app.api.meta import IntOrString, KubeModel, KubeObject, LabelSelector


class ClusterColocationProfileSpec(KubeModel):
    """``ClusterColocationProfile.spec``.

    Attributes:
        namespace_selector / selector: which pods the profile applies to; absent or empty
            selects everything.
        probability: share of matching pods to mutate: an int (percent, 0..100) or ``"NN%"``.
        qos_class: koord QoS class to set (LSE | LSR | LS | BE | SYSTEM).
        priority_class_name: Kubernetes PriorityClass to set.
        koordinator_priority: sub-priority, written to label ``koordinator.sh/priority``.
        labels / annotations: set on the pod.
        label_keys_mapping / annotation_keys_mapping: copy the value of key -> new key.
        label_suffixes: append suffix to the value of each named label.
        scheduler_name: scheduler to set on the pod.
        patch: strategic merge patch applied to the pod, raw JSON.
    """

    namespace_selector: LabelSelector | None = None
    selector: LabelSelector | None = None
    probability: IntOrString | None = None
    qos_class: str | None = None
    priority_class_name: str | None = None
    koordinator_priority: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    label_keys_mapping: dict[str, str] | None = None
    annotation_keys_mapping: dict[str, str] | None = None
    label_suffixes: dict[str, str] | None = None
    scheduler_name: str | None = None
    patch: Any = None


class ClusterColocationProfileStatus(KubeModel):
    """``ClusterColocationProfile.status``: empty upstream; unknown fields are kept."""


class ClusterColocationProfile(KubeObject):
    """ClusterColocationProfile: cluster-scoped pod mutation profile.

    Follows ``apis/config/v1alpha1/cluster_colocation_profile_types.go``.
    """

    KIND: ClassVar[str] = "ClusterColocationProfile"
    API_VERSION: ClassVar[str] = KINDS["ClusterColocationProfile"].api_version

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = KIND
    spec: ClusterColocationProfileSpec = Field(default_factory=ClusterColocationProfileSpec)
    status: ClusterColocationProfileStatus = Field(default_factory=ClusterColocationProfileStatus)
