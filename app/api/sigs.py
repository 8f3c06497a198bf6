"""scheduler-plugins kinds used by Koordinator: ElasticQuota and PodGroup.

Group ``scheduling.sigs.k8s.io/v1alpha1``. Follows upstream's vendored copy
``apis/thirdparty/scheduler-plugins/pkg/apis/scheduling/v1alpha1/types.go``. Koordinator's extra
quota semantics (tree, sharing, runtime) live in labels/annotations, not in these fields.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from pydantic import Field

from app.api.kinds import KINDS
from app.api.meta import KubeModel, KubeObject, ResourceList


class ElasticQuotaSpec(KubeModel):
    """``ElasticQuota.spec``: guaranteed ``min`` and ceiling ``max`` quantities per resource."""

    min: ResourceList | None = None
    max: ResourceList | None = None


class ElasticQuotaStatus(KubeModel):
    """``ElasticQuota.status``: ``used`` quantities (written by the scheduler's quota controller)."""

    used: ResourceList | None = None


class ElasticQuota(KubeObject):
    """ElasticQuota: namespaced; one node of Koordinator's quota tree.

    Follows ``apis/thirdparty/scheduler-plugins/pkg/apis/scheduling/v1alpha1/types.go``.
    """

    KIND: ClassVar[str] = "ElasticQuota"
    API_VERSION: ClassVar[str] = KINDS["ElasticQuota"].api_version

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = KIND
    spec: ElasticQuotaSpec = Field(default_factory=ElasticQuotaSpec)
    status: ElasticQuotaStatus = Field(default_factory=ElasticQuotaStatus)


class PodGroupSpec(KubeModel):
    """``PodGroup.spec``.

    Attributes:
        min_member: pods that must be schedulable together (an absent value means 0).
        min_resources: quantities the whole gang needs.
        schedule_timeout_seconds: how long members wait for the gang, seconds.
    """

    min_member: int | None = None
    min_resources: ResourceList | None = None
    schedule_timeout_seconds: int | None = None


class PodGroupStatus(KubeModel):
    """``PodGroup.status``.

    ``phase``: Pending | PreScheduling | Scheduling | Scheduled | Running | Finished | Failed |
    Unknown. The counters are pod counts.
    """

    phase: str | None = None
    occupied_by: str | None = None
    scheduled: int | None = None
    running: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    schedule_start_time: datetime | None = None


class PodGroup(KubeObject):
    """PodGroup: namespaced; a gang of pods scheduled all-or-nothing.

    Follows ``apis/thirdparty/scheduler-plugins/pkg/apis/scheduling/v1alpha1/types.go``.
    """

    KIND: ClassVar[str] = "PodGroup"
    API_VERSION: ClassVar[str] = KINDS["PodGroup"].api_version

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = KIND
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)
    status: PodGroupStatus = Field(default_factory=PodGroupStatus)
