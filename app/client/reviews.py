"""The two review requests of delegated authentication and authorization, on the wire as the API server takes them.

- ``TokenReview`` (authentication.k8s.io/v1, ``POST /apis/authentication.k8s.io/v1/tokenreviews``): is this
  bearer token valid, and whose is it? The answer's ``status`` carries ``authenticated``, ``user``
  (``username``, ``uid``, ``groups``, ``extra``), ``audiences`` and ``error``.
- ``SubjectAccessReview`` (authorization.k8s.io/v1, ``POST /apis/authorization.k8s.io/v1/subjectaccessreviews``):
  may this user do this? ``spec`` carries the user and either ``resourceAttributes`` (namespace, verb, group,
  resource, subresource, name) or ``nonResourceAttributes`` (path, verb); the answer's ``status`` carries
  ``allowed``, ``denied``, ``reason`` and ``evaluationError``.

The shapes follow k8s.io/api/authentication/v1 and k8s.io/api/authorization/v1; the requests are what
k8s.io/apiserver's delegating authenticator (``plugin/pkg/authenticator/token/webhook``) and delegating
authorizer (``plugin/pkg/authorizer/webhook``) send. :class:`~app.client.aio.AsyncClient` sends them
(:meth:`~app.client.aio.AsyncClient.review_token`, :meth:`~app.client.aio.AsyncClient.review_access`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "SUBJECT_ACCESS_REVIEWS",
    "TOKEN_REVIEWS",
    "AccessDecision",
    "Attributes",
    "TokenDecision",
    "UserInfo",
    "access_decision",
    "subject_access_review",
    "token_decision",
    "token_review",
]

#: Where TokenReviews are created.
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
#: Where SubjectAccessReviews are created.
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@dataclass(frozen=True)
class UserInfo:
    """Who a request comes from (authentication/v1 ``UserInfo``; k8s.io/apiserver ``user.Info``).

    Attributes:
        username: the user's name (``system:serviceaccount:ns:name`` for a ServiceAccount).
        uid: the user's uid ("" when the authenticator gives none).
        groups: the groups the user is in (``system:authenticated`` among them for a valid token).
        extra: further attributes, each a sorted tuple of strings, as pairs sorted by key (hashable, so a
            user can key a cache).
    """

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Attributes:
    """What a request asks to do, as the authorizer sees it (k8s.io/apiserver ``authorizer.Attributes``).

    A resource request names ``resource`` (and ``group``, ``namespace``, ``name``, ``subresource``); a
    non-resource request names ``path``. ``verb`` is the Kubernetes verb (``get``, ``list``, ``create``) of a
    resource request, the lower-case HTTP method (``get``, ``post``) of a non-resource one.

    Attributes:
        verb: the verb.
        resource: the resource's plural name (``pods``); "" for a non-resource request.
        group: the resource's API group ("" for the core group).
        namespace: the namespace ("" for a cluster-scoped resource or all namespaces).
        name: the object's name ("" for a collection).
        subresource: the subresource ("" for none).
        path: the request path of a non-resource request ("" for a resource request).
    """

    verb: str
    resource: str = ""
    group: str = ""
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    path: str = ""

    @property
    def is_resource_request(self) -> bool:
        """Whether this names a resource (else a non-resource path)."""
        return bool(self.resource)

    def forbidden_message(self, username: str, reason: str = "") -> str:
        """The message kube-apiserver answers a forbidden request with (``responsewriters.forbiddenMessage``
        wrapped in ``errors.NewForbidden``), e.g. ``pods "p" is forbidden: User "alice" cannot get resource
        "pods" in API group "" in the namespace "default"`` or ``forbidden: User "alice" cannot get path
        "/metrics"``, with ``: reason`` appended when the authorizer gave one."""
        if not self.is_resource_request:
            text = f'forbidden: User "{username}" cannot {self.verb} path "{self.path}"'
        else:
            resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
            where = f'in the namespace "{self.namespace}"' if self.namespace else "at the cluster scope"
            qualified = f"{self.resource}.{self.group}" if self.group else self.resource
            text = (
                f'{qualified} "{self.name}" is forbidden: User "{username}" cannot {self.verb} resource '
                f'"{resource}" in API group "{self.group}" {where}'
            )
        return f"{text}: {reason}" if reason else text


@dataclass(frozen=True)
class TokenDecision:
    """The ``status`` of a TokenReview.

    Attributes:
        authenticated: whether the token is valid.
        user: whose it is (None when not authenticated).
        audiences: the audiences the token is valid for (empty when the server does not say).
        error: why it is not valid, as the API server said ("" when it said nothing).
    """

    authenticated: bool
    user: UserInfo | None = None
    audiences: tuple[str, ...] = ()
    error: str = ""


@dataclass(frozen=True)
class AccessDecision:
    """The ``status`` of a SubjectAccessReview.

    Attributes:
        allowed: whether the action is allowed.
        denied: whether an authorizer denied it outright (``allowed`` is then false too); both false means no
            authorizer had an opinion, which denies as well.
        reason: why, as the authorizers said ("" when none said).
        evaluation_error: an error some authorizer met while deciding ("" when none).
    """

    allowed: bool
    denied: bool = False
    reason: str = ""
    evaluation_error: str = ""


def _extra(raw: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(raw, dict):
        return ()
    return tuple(sorted((str(k), tuple(sorted(str(v) for v in vs))) for k, vs in raw.items() if isinstance(vs, list)))


def token_review(token: str, audiences: tuple[str, ...] = ()) -> dict[str, Any]:
    """The body of a TokenReview of ``token`` (``spec.audiences`` only when ``audiences`` is not empty, as the
    delegating authenticator leaves it out when no API audiences are configured)."""
    spec: dict[str, Any] = {"token": token}
    if audiences:
        spec["audiences"] = list(audiences)
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}


def token_decision(answer: dict[str, Any]) -> TokenDecision:
    """The :class:`TokenDecision` of a TokenReview answer (missing fields are their zero values, as the API
    server leaves them out: ``authenticated: false`` is not written)."""
    status = answer.get("status") or {}
    if not isinstance(status, dict):
        status = {}
    authenticated = status.get("authenticated") is True
    raw_user = status.get("user") or {}
    user = None
    if authenticated and isinstance(raw_user, dict):
        groups = raw_user.get("groups") or []
        user = UserInfo(
            username=str(raw_user.get("username") or ""),
            uid=str(raw_user.get("uid") or ""),
            groups=tuple(str(g) for g in groups) if isinstance(groups, list) else (),
            extra=_extra(raw_user.get("extra")),
        )
    audiences = status.get("audiences") or []
    return TokenDecision(
        authenticated=authenticated and user is not None,
        user=user,
        audiences=tuple(str(a) for a in audiences) if isinstance(audiences, list) else (),
        error=str(status.get("error") or ""),
    )


def subject_access_review(user: UserInfo, attributes: Attributes) -> dict[str, Any]:
    """The body of a SubjectAccessReview of ``user`` doing ``attributes`` (empty fields left out, as the
    delegating authorizer's ``omitempty`` fields are)."""
    spec: dict[str, Any] = {"user": user.username}
    if user.groups:
        spec["groups"] = list(user.groups)
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = {k: list(vs) for k, vs in user.extra}
    if attributes.is_resource_request:
        resource = {
            "namespace": attributes.namespace,
            "verb": attributes.verb,
            "group": attributes.group,
            "resource": attributes.resource,
            "subresource": attributes.subresource,
            "name": attributes.name,
        }
        spec["resourceAttributes"] = {k: v for k, v in resource.items() if v}
    else:
        spec["nonResourceAttributes"] = {"path": attributes.path, "verb": attributes.verb}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def access_decision(answer: dict[str, Any]) -> AccessDecision:
    """The :class:`AccessDecision` of a SubjectAccessReview answer (missing fields are their zero values)."""
    status = answer.get("status") or {}
    if not isinstance(status, dict):
        status = {}
    return AccessDecision(
        allowed=status.get("allowed") is True,
        denied=status.get("denied") is True,
        reason=str(status.get("reason") or ""),
        evaluation_error=str(status.get("evaluationError") or ""),
    )
