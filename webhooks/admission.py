"""admission.k8s.io/v1 AdmissionReview: the request the API server posts and the answers we send.

Wire shape follows k8s.io/api/admission/v1 (``types.go``): camelCase keys, ``request.uid`` echoed in
``response.uid``, a JSONPatch answered base64-encoded with ``patchType: JSONPatch``.
"""

from __future__ import annotations

import base64
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

#: API version of the reviews we accept and answer.
ADMISSION_API_VERSION = "admission.k8s.io/v1"


class GroupVersionKind(BaseModel):
    """``metav1.GroupVersionKind`` as it appears in ``request.kind``."""

    model_config = ConfigDict(extra="allow")
    group: str = ""
    version: str = ""
    kind: str = ""


class GroupVersionResource(BaseModel):
    """``metav1.GroupVersionResource`` as it appears in ``request.resource``."""

    model_config = ConfigDict(extra="allow")
    group: str = ""
    version: str = ""
    resource: str = ""


class AdmissionRequest(BaseModel):
    """``AdmissionRequest``: what is being admitted.

    ``object`` is the new object (absent on DELETE), ``oldObject`` the previous one (UPDATE and
    DELETE). On CREATE the object has no ``metadata.uid`` yet, and ``name`` may be empty when the
    object uses ``generateName``.
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    uid: str = Field(min_length=1)
    kind: GroupVersionKind
    resource: GroupVersionResource
    subResource: str = ""
    name: str = ""
    namespace: str = ""
    operation: Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
    userInfo: dict[str, Any] = Field(default_factory=dict)
    object: dict[str, Any] | None = None
    oldObject: dict[str, Any] | None = None
    dryRun: bool | None = None
    options: dict[str, Any] | None = None


class AdmissionReview(BaseModel):
    """The envelope the API server posts: ``apiVersion``, ``kind`` and ``request``."""

    model_config = ConfigDict(extra="allow")
    apiVersion: Literal["admission.k8s.io/v1"]
    kind: Literal["AdmissionReview"]
    request: AdmissionRequest


class AdmissionResponse(BaseModel):
    """``AdmissionResponse``. Build it with :func:`allow`, :func:`deny`, :func:`patched` or :func:`errored`.

    Attributes:
        uid: the request's uid (always echoed).
        allowed: whether the object is admitted.
        code / message: ``status.code`` / ``status.message`` when denied (403 for a policy
            refusal, 400 for a malformed object, 500 for our own failure).
        patch: JSONPatch operations (RFC 6902) for a mutating webhook, or None.
        warnings: shown to the client by kubectl.
    """

    uid: str
    allowed: bool
    code: int = 200
    message: str = ""
    patch: list[dict[str, Any]] | None = None
    warnings: list[str] = Field(default_factory=list)

    def to_review(self) -> dict[str, Any]:
        """The AdmissionReview JSON answered to the API server."""
        response: dict[str, Any] = {"uid": self.uid, "allowed": self.allowed}
        if not self.allowed or self.message:
            status: dict[str, Any] = {"code": self.code}
            if self.message:
                status["message"] = self.message
            if not self.allowed:
                status["reason"] = _REASONS.get(self.code, "")
            response["status"] = {k: v for k, v in status.items() if v != ""}
        if self.patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(orjson.dumps(self.patch)).decode()
        if self.warnings:
            response["warnings"] = self.warnings
        return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "response": response}


_REASONS = {400: "BadRequest", 403: "Forbidden", 422: "Invalid", 500: "InternalError"}


def allow(uid: str, message: str = "") -> AdmissionResponse:
    """Admit unchanged."""
    return AdmissionResponse(uid=uid, allowed=True, message=message)


def deny(uid: str, message: str, code: int = 403) -> AdmissionResponse:
    """Refuse with ``message`` (upstream's ``admission.Denied`` answers 403)."""
    return AdmissionResponse(uid=uid, allowed=False, code=code, message=message)


def errored(uid: str, message: str, code: int = 500) -> AdmissionResponse:
    """Refuse because of an error (upstream's ``admission.Errored``): 400 for a bad object, 500 for ours."""
    return AdmissionResponse(uid=uid, allowed=False, code=code, message=message)


def patched(uid: str, ops: list[dict[str, Any]]) -> AdmissionResponse:
    """Admit with the JSONPatch ``ops`` (an empty list admits unchanged)."""
    return AdmissionResponse(uid=uid, allowed=True, patch=ops or None)
