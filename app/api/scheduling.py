"""Koordinator scheduling kinds: Device, Reservation and PodMigrationJob.

Group ``scheduling.koordinator.sh/v1alpha1``. Follows upstream's
``apis/scheduling/v1alpha1/device_types.go``, ``reservation_types.go`` and
``pod_migration_job_types.go``. Enumerated fields are plain strings so unknown values survive;
the accepted values are listed in each docstring.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from pydantic import Field

from app.api.kinds import KINDS
from app.api.meta import (
    Condition,
    KubeModel,
    KubeObject,
    LabelSelector,
    ObjectMeta,
    ObjectReference,
    OwnerReference,
    PodTemplateSpec,
    ResourceList,
    Taint,
)

# --- Device (device_types.go) ----------------------------------------------------------------


class DeviceTopology(KubeModel):
    """Where a device sits: CPU socket, NUMA node, PCIe root and bus id (``device_types.go``).

    ``socketID``, ``nodeID`` and ``pcieID`` are required, as in upstream's schema.
    """

    socket_id: int = Field(alias="socketID")
    node_id: int = Field(alias="nodeID")
    pcie_id: str = Field(alias="pcieID")
    bus_id: str | None = Field(default=None, alias="busID")


class VirtualFunction(KubeModel):
    """One SR-IOV virtual function: device ``minor`` (required) and PCI ``busID``."""

    minor: int
    bus_id: str | None = Field(default=None, alias="busID")


class VirtualFunctionGroup(KubeModel):
    """A labelled group of virtual functions of one physical device."""

    labels: dict[str, str] | None = None
    vfs: list[VirtualFunction] | None = None


class DeviceInfo(KubeModel):
    """One physical device on a node (``device_types.go`` DeviceInfo).

    Attributes:
        type: ``gpu``, ``fpga`` or ``rdma``.
        uuid: the device id (JSON ``id``): GPU UUID or PCI bus id.
        minor / module_id: device minor number and module id.
        health: required; ``false`` means the device must not be allocated.
        resources: quantities the device offers, e.g. ``koordinator.sh/gpu-memory: 16Gi``.
    """

    type: str | None = None
    labels: dict[str, str] | None = None
    uuid: str | None = Field(default=None, alias="id")
    minor: int | None = None
    module_id: int | None = Field(default=None, alias="moduleID")
    health: bool
    resources: ResourceList | None = None
    topology: DeviceTopology | None = None
    vf_groups: list[VirtualFunctionGroup] | None = Field(default=None, alias="vfGroups")
    conditions: list[Condition] | None = None


class DeviceSpec(KubeModel):
    """``Device.spec``: the devices of the node the Device object is named after."""

    devices: list[DeviceInfo] | None = None


class DeviceAllocationItem(KubeModel):
    """One pod's share of a device type: pod ``name``/``namespace``/``uuid`` and device ``minors``."""

    name: str | None = None
    namespace: str | None = None
    uuid: str | None = None
    minors: list[int] | None = None


class DeviceAllocation(KubeModel):
    """Allocations of one device ``type`` (gpu/fpga/rdma)."""

    type: str | None = None
    entries: list[DeviceAllocationItem] | None = None


class DeviceStatus(KubeModel):
    """``Device.status``: current allocations per device type."""

    allocations: list[DeviceAllocation] | None = None


class Device(KubeObject):
    """Device: cluster-scoped, named after its node; inventory of GPUs/FPGAs/RDMA NICs.

    Follows ``apis/scheduling/v1alpha1/device_types.go``.
    """

    KIND: ClassVar[str] = "Device"
    API_VERSION: ClassVar[str] = KINDS["Device"].api_version

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = KIND
    spec: DeviceSpec = Field(default_factory=DeviceSpec)
    status: DeviceStatus = Field(default_factory=DeviceStatus)


# --- Reservation (reservation_types.go) --------------------------------------------------------


class ReservationControllerReference(OwnerReference):
    """An owner reference plus an optional ``namespace``; matches pods whose controller it is."""

    namespace: str | None = None


class ReservationOwner(KubeModel):
    """One owner selector; ``object``, ``controller`` and ``labelSelector`` are ANDed.

    An absent sub-selector matches everything; the owners of a Reservation are ORed.
    """

    object: ObjectReference | None = None
    controller: ReservationControllerReference | None = None
    label_selector: LabelSelector | None = None


class PreAllocationPolicy(KubeModel):
    """How pre-allocation picks running pods: ``mode`` ``Default`` | ``Cluster``; ``enableMultiple``."""

    mode: str | None = None
    enable_multiple: bool | None = None


class ReservationSpec(KubeModel):
    """``Reservation.spec``.

    Attributes:
        template: required; the "reserve pod" scheduled in place of real pods.
        owners: required; the pods allowed to consume the reservation (ORed).
        ttl: Go duration string (CRD default ``24h``; ``0s`` disables expiry).
        expires: absolute expiry time; checked before ``ttl``.
        allocate_once: consumed by the first owner pod only (upstream default true).
        allocate_policy: ``""`` | ``Aligned`` | ``Restricted``.
    """

    template: PodTemplateSpec
    owners: list[ReservationOwner]
    ttl: str | None = None
    expires: datetime | None = None
    pre_allocation: bool | None = None
    allocate_once: bool | None = None
    allocate_policy: str | None = None
    unschedulable: bool | None = None
    taints: list[Taint] | None = None
    pre_allocation_policy: PreAllocationPolicy | None = None


class ReservationCondition(KubeModel):
    """A Reservation condition: ``type`` ``Scheduled`` | ``Ready``; ``status`` True/False/Unknown.

    Reasons used upstream: Scheduled, Unschedulable, Available, Succeeded, Expired.
    """

    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    last_probe_time: datetime | None = None
    last_transition_time: datetime | None = None


class ReservationStatus(KubeModel):
    """``Reservation.status``.

    Attributes:
        phase: ``Pending`` | ``Available`` | ``Succeeded`` | ``Waiting`` | ``Failed``.
        current_owners: pods currently consuming the reservation.
        node_name: node the reserve pod was bound to.
        allocatable / allocated: reserved and consumed quantities.
    """

    phase: str | None = None
    conditions: list[ReservationCondition] | None = None
    current_owners: list[ObjectReference] | None = None
    node_name: str | None = None
    allocatable: ResourceList | None = None
    allocated: ResourceList | None = None


class ReservationTemplateSpec(KubeModel):
    """Metadata and spec of a Reservation to create (used by PodMigrationJob)."""

    metadata: ObjectMeta | None = None
    spec: ReservationSpec | None = None


class Reservation(KubeObject):
    """Reservation: cluster-scoped; holds node resources for its owner pods.

    ``spec`` is required. Follows ``apis/scheduling/v1alpha1/reservation_types.go``.
    """

    KIND: ClassVar[str] = "Reservation"
    API_VERSION: ClassVar[str] = KINDS["Reservation"].api_version

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = KIND
    spec: ReservationSpec
    status: ReservationStatus = Field(default_factory=ReservationStatus)


# --- PodMigrationJob (pod_migration_job_types.go) ------------------------------------------------


class PodMigrateReservationOptions(KubeModel):
    """Reservation to use or create before evicting: ``reservationRef`` or ``template``."""

    reservation_ref: ObjectReference | None = None
    template: ReservationTemplateSpec | None = None
    preemption_options: dict[str, Any] | None = None


class PodMigrationJobSpec(KubeModel):
    """``PodMigrationJob.spec``.

    Attributes:
        pod_ref: required; the pod to migrate.
        ttl: Go duration string; the job fails with reason ``Timeout`` after it.
        mode: ``ReservationFirst`` (default) | ``EvictDirectly``.
        delete_options: ``metav1.DeleteOptions`` as raw JSON.
    """

    paused: bool | None = None
    ttl: str | None = None
    mode: str | None = None
    pod_ref: ObjectReference
    reservation_options: PodMigrateReservationOptions | None = None
    delete_options: dict[str, Any] | None = None


class PodMigrationJobCondition(KubeModel):
    """A job condition; ``type`` and ``status`` are required.

    Types: ReservationCreated, ReservationScheduled, Preemption, Eviction, PodScheduled,
    PodBoundReservation, BoundPodReady, ReservationBound. ``status`` is True/False/Unknown.
    """

    type: str
    status: str
    last_probe_time: datetime | None = None
    last_transition_time: datetime | None = None
    reason: str | None = None
    message: str | None = None


class PodMigrationJobPreemptedReservation(KubeModel):
    """A reservation preempted by the job, with the pods that had been using it."""

    namespace: str | None = None
    name: str | None = None
    node_name: str | None = None
    phase: str | None = None
    preempted_pod_ref: ObjectReference | None = None
    pods_ref: list[ObjectReference] | None = None


class PodMigrationJobStatus(KubeModel):
    """``PodMigrationJob.status``; ``phase`` is Pending | Running | Succeeded | Failed | Aborted."""

    phase: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    conditions: list[PodMigrationJobCondition] | None = None
    node_name: str | None = None
    pod_ref: ObjectReference | None = None
    preempted_pods_ref: list[ObjectReference] | None = None
    preempted_pods_reservation: list[PodMigrationJobPreemptedReservation] | None = None


class PodMigrationJob(KubeObject):
    """PodMigrationJob (short ``pmj``): cluster-scoped request to move one pod elsewhere.

    ``spec`` is required. Follows ``apis/scheduling/v1alpha1/pod_migration_job_types.go``.
    """

    KIND: ClassVar[str] = "PodMigrationJob"
    API_VERSION: ClassVar[str] = KINDS["PodMigrationJob"].api_version

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = KIND
    spec: PodMigrationJobSpec
    status: PodMigrationJobStatus = Field(default_factory=PodMigrationJobStatus)
