"""Kubernetes meta types embedded by the Koordinator kinds the service parses with pydantic.

Pydantic v2 counterparts of the parts of ``k8s.io/apimachinery/pkg/apis/meta/v1`` that the
modelled kinds use (ObjectMeta with its owner references, Condition), plus :class:`KubeObject`,
the base of every top-level kind. Only NodeMetric (:mod:`app.api.slo`) is modelled whole; the
NodeSLO spec and the slo-controller ConfigMap parts are modelled from their spec down.

Conventions shared by every model in :mod:`app.api`:

* JSON names are upstream's json tags exactly; Python attributes are their snake_case form.
* Unknown fields are kept (``extra="allow"``) so newer upstream fields survive a round trip.
* Optional fields default to ``None``; timestamps (``metav1.Time``) are :class:`datetime`;
  durations (``metav1.Duration``) stay Go duration strings such as ``"5m0s"``.
* Resource quantities are kept exactly as given (``"500m"``, ``"4Gi"``, ``2``); parse them with
  :mod:`app.api.quantity` where arithmetic is needed.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

#: A ``corev1.ResourceList``: resource name -> Kubernetes quantity, kept as given (not parsed).
ResourceList = dict[str, str | int | float]

#: A Kubernetes quantity kept as given (``"100Mi"``, ``"500m"``, ``4``).
Quantity = str | int | float

#: ``intstr.IntOrString``: an integer or a string such as ``"50%"``.
IntOrString = int | str


class KubeModel(BaseModel):
    """Base of every API model: camelCase aliases, population by name, unknown fields kept.

    Subclasses name attributes in snake_case; the JSON name is produced by ``to_camel`` unless a
    field sets an explicit ``alias`` (needed where upstream spells an initialism, e.g. ``numaNodeID``).
    """

    model_config = ConfigDict(
        populate_by_name=True,
        extra="allow",
        alias_generator=to_camel,
        protected_namespaces=(),
    )


class OwnerReference(KubeModel):
    """``metav1.OwnerReference``: the object that owns (and garbage-collects) another.

    ``apiVersion``, ``kind``, ``name`` and ``uid`` are required, as in upstream's schema.
    """

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KubeModel):
    """``metav1.ObjectMeta``: name, namespace, identity, labels and annotations of an object.

    ``generation`` is an int; ``creationTimestamp``/``deletionTimestamp`` are RFC 3339 times.
    """

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None


class Condition(KubeModel):
    """``metav1.Condition``: a typed status condition (``status`` is True/False/Unknown).

    All of ``type``, ``status``, ``lastTransitionTime``, ``reason`` and ``message`` are required,
    as in upstream's generated CRD schema.
    """

    type: str
    status: str
    observed_generation: int | None = None
    last_transition_time: datetime
    reason: str
    message: str


class KubeObject(KubeModel):
    """Base of every top-level kind: ``apiVersion``, ``kind`` and ``metadata``.

    Subclasses set the class constants ``API_VERSION`` and ``KIND`` (and the matching field
    defaults); an object carrying a different ``apiVersion`` or ``kind`` fails validation with
    ``ValueError`` (surfaced by pydantic as a ``ValidationError``).
    """

    API_VERSION: ClassVar[str] = ""
    KIND: ClassVar[str] = ""

    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @field_validator("api_version")
    @classmethod
    def _check_api_version(cls, value: str) -> str:
        """Reject an ``apiVersion`` other than the class's ``API_VERSION`` (when it has one)."""
        if cls.API_VERSION and value != cls.API_VERSION:
            raise ValueError(f"expected {cls.API_VERSION!r}")
        return value

    @field_validator("kind")
    @classmethod
    def _check_kind(cls, value: str) -> str:
        """Reject a ``kind`` other than the class's ``KIND`` (when it has one)."""
        if cls.KIND and value != cls.KIND:
            raise ValueError(f"expected {cls.KIND!r}")
        return value

    @property
    def name(self) -> str:
        """``metadata.name``, or ``""`` when unset."""
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        """``metadata.namespace``, or ``""`` for cluster-scoped objects."""
        return self.metadata.namespace or ""
