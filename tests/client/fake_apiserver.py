"""A fake kube-apiserver over real HTTP/1.1 (``http.server`` in a thread), speaking the real wire.

Objects live in memory per collection path; every write bumps a global resourceVersion. Failures
are answered with ``Status`` bodies shaped exactly as kube-apiserver writes them
(``{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":...,"reason":...,
"details":{...},"code":...}``):

* GET of a missing object: 404 NotFound (``pods "x" not found``, details name/kind);
* POST of an existing name: 409 AlreadyExists; PUT with a stale resourceVersion: 409 Conflict;
* POST ``pods/{name}/eviction``: 429 TooManyRequests with ``retryAfterSeconds`` when the pod is
  labelled ``pdb=blocked`` (a PodDisruptionBudget), or when a seeded policy/v1 PodDisruptionBudget selecting
  it allows no disruption (an allowed eviction uses one up, :meth:`FakeAPIServer.take_disruption`); 409 on a
  uid precondition mismatch;
* POST ``pods/{name}/binding``: 409 Conflict when the pod is bound already;
* LIST with ``limit``/``continue`` (410 Expired once continue tokens are expired);
* WATCH (``watch=true``): a scripted stream of lines, chunked, ended cleanly, broken (no final
  chunk) or held open until the client goes away;
* ``fail[(method, path)] = (code, body, headers)`` answers any request with a canned failure
  (``fail_once``: only the next one);
* bearer-token checking (401 Unauthorized) and optional TLS with client-certificate checking;
* ``POST /apis/authentication.k8s.io/v1/tokenreviews`` and ``/apis/authorization.k8s.io/v1/subjectaccessreviews``
  (201, the review echoed with its ``status`` as kube-apiserver writes it): the tokens of ``users`` are valid,
  and ``grant(user, ...)`` rules (RBAC-like: each given field must match, ``*`` matches any, a non-resource
  path ending in ``*`` matches by prefix) allow; everything else is denied with ``deny_reason``.
"""

from __future__ import annotations

import copy
import json
import re
import ssl
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jsonpatch
import jsonpointer

_PATH = re.compile(
    r"^(?P<coll>/api/v1(?:/namespaces/[^/]+)?/[a-z]+|/apis/[^/]+/[^/]+(?:/namespaces/[^/]+)?/[a-z]+)"
    r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[a-z]+))?)?$"
)


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A failure ``Status`` as kube-apiserver encodes it (``details`` left out when empty, as it omits it)."""
    out: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details:
        out["details"] = details
    out["code"] = code
    return out


def success(code: int = 201) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}


@dataclass
class Recorded:
    method: str
    path: str  # with the query string, as sent
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: Any
    peer: tuple[str, int]
    at: float = field(default_factory=time.monotonic)  # when it arrived


@dataclass
class WatchScript:
    """What the next watch of a collection streams: ``lines`` (objects are JSON-encoded, bytes sent
    as they are), then ``end``: ``clean`` (final chunk), ``break`` (connection closed without it) or
    ``hold`` (kept open until the client closes it or the fake shuts down)."""

    lines: list[Any] = field(default_factory=list)
    end: str = "clean"


class FakeAPIServer:
    def __init__(self, *, tls: ssl.SSLContext | None = None, tokens: set[str] | None = None) -> None:
        self.lock = threading.Lock()
        self.rv = 100
        self.store: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        self.tokens = tokens  # None: no authentication
        self.users: dict[str, dict[str, Any]] = {}  # TokenReview: token -> authentication/v1 UserInfo
        self.grants: list[tuple[str, dict[str, str]]] = []  # SubjectAccessReview: (user or group, rule)
        self.deny_reason = ""  # SubjectAccessReview status.reason of a denial (RBAC gives none)
        self.fail: dict[tuple[str, str], tuple[int, Any, dict[str, str]]] = {}
        self.fail_once: dict[tuple[str, str], tuple[int, Any, dict[str, str]]] = {}
        self.requests: list[Recorded] = []
        self.continue_expired = False
        self.watch_scripts: dict[str, list[WatchScript]] = defaultdict(list)
        self.published: dict[str, list[dict[str, Any]]] = defaultdict(list)  # events for held watches
        self.open_watches = 0
        self.closed = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.closed.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- state ------------------------------------------------------------------------------------

    def bump(self) -> str:
        self.rv += 1
        return str(self.rv)

    def seed(self, coll: str, *objs: dict[str, Any]) -> None:
        with self.lock:
            for o in objs:
                o = copy.deepcopy(o)
                meta = o.setdefault("metadata", {})
                meta["resourceVersion"] = self.bump()
                meta.setdefault("uid", str(uuid.uuid4()))
                self.store[coll][meta["name"]] = o

    def publish(self, coll: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` in ``coll`` (``ADDED``/``MODIFIED``; ``DELETED`` drops it) with a new resourceVersion
        and stream the event to the watches of ``coll`` held open now (those started with no script, or a
        ``hold`` one): a change made after the client listed. Returns the stored object."""
        with self.lock:
            o = copy.deepcopy(obj)
            meta = o.setdefault("metadata", {})
            meta["resourceVersion"] = self.bump()
            meta.setdefault("uid", str(uuid.uuid4()))
            if kind == "DELETED":
                self.store[coll].pop(meta["name"], None)
            else:
                self.store[coll][meta["name"]] = o
            self.published[coll].append({"type": kind, "object": o})
            return o

    def take_disruption(self, pod: dict[str, Any]) -> str | None:
        """As kube-apiserver's eviction REST does with real PodDisruptionBudgets (policy/v1, seeded under
        ``/apis/policy/v1/namespaces/<ns>/poddisruptionbudgets``; ``spec.selector.matchLabels`` only): a PDB
        selecting the pod with ``status.disruptionsAllowed`` < 1 refuses (the message, for a 429), else every
        selecting PDB's ``disruptionsAllowed`` is decremented (the test plays the disruption controller that
        raises it again) and None is returned."""
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        coll = f"/apis/policy/v1/namespaces/{meta.get('namespace') or 'default'}/poddisruptionbudgets"
        with self.lock:
            pdbs = [
                pdb
                for pdb in self.store.get(coll, {}).values()
                if (sel := ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels"))
                and all(labels.get(k) == v for k, v in sel.items())
            ]
            for pdb in pdbs:
                if int((pdb.get("status") or {}).get("disruptionsAllowed") or 0) < 1:
                    return f"The disruption budget {pdb['metadata']['name']} needs more healthy pods"
            for pdb in pdbs:
                pdb.setdefault("status", {})["disruptionsAllowed"] = int(pdb["status"]["disruptionsAllowed"]) - 1
                pdb["metadata"]["resourceVersion"] = self.bump()
        return None

    def calls(self, method: str | None = None) -> list[Recorded]:
        return [r for r in self.requests if method is None or r.method == method]

    def reviews(self, kind: str) -> list[Recorded]:
        """The TokenReviews (``kind="tokenreviews"``) or SubjectAccessReviews (``"subjectaccessreviews"``) asked."""
        return [r for r in self.calls("POST") if r.path.rsplit("/", 1)[-1] == kind]

    def add_user(self, token: str, username: str, groups: list[str] | None = None, uid: str = "") -> None:
        """Make ``token`` authenticate as ``username`` (``system:authenticated`` added to ``groups``)."""
        user: dict[str, Any] = {"username": username, "groups": [*(groups or []), "system:authenticated"]}
        if uid:
            user["uid"] = uid
        self.users[token] = user

    def grant(self, subject: str, **rule: str) -> None:
        """Allow ``subject`` (a user or group name) what ``rule`` names: resource attributes (``verb``,
        ``resource``, ``group``, ``namespace``, ``name``, ``subresource``) or ``path`` and ``verb``."""
        self.grants.append((subject, rule))

    def _allowed(self, spec: dict[str, Any]) -> bool:
        subjects = {spec.get("user", ""), *(spec.get("groups") or [])}
        resource = spec.get("resourceAttributes")
        attrs = resource if resource is not None else spec.get("nonResourceAttributes") or {}
        for subject, rule in self.grants:
            if subject not in subjects or ("path" in rule) == (resource is not None):
                continue
            if all(_rule_matches(key, want, str(attrs.get(key, ""))) for key, want in rule.items()):
                return True
        return False


def _rule_matches(key: str, want: str, have: str) -> bool:
    if want == "*" or want == have:
        return True
    return key == "path" and want.endswith("*") and have.startswith(want[:-1])


def _plural(coll: str) -> str:
    return coll.rsplit("/", 1)[-1]


def _handler(fake: FakeAPIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

        def log_message(self, format: str, *args: Any) -> None:
            pass

        # -- plumbing ------------------------------------------------------------------------

        def _send(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _handle(self) -> None:
            if fake.closed.is_set():  # closed: a kept-alive connection gets no answer either
                self.close_connection = True
                return
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            with fake.lock:
                fake.requests.append(Recorded(self.command, self.path, query, headers, body, self.client_address))
            scheme, _, token = headers.get("authorization", "").partition(" ")
            if fake.tokens is not None and (scheme.lower() != "bearer" or token not in fake.tokens):
                self._send(401, status(401, "Unauthorized", "Unauthorized"))
                return
            with fake.lock:
                canned = fake.fail_once.pop((self.command, url.path), None) or fake.fail.get((self.command, url.path))
            if canned is not None:
                self._send(*canned)
                return
            if self.command == "POST" and url.path == "/apis/authentication.k8s.io/v1/tokenreviews":
                self._token_review(body)
                return
            if self.command == "POST" and url.path == "/apis/authorization.k8s.io/v1/subjectaccessreviews":
                self._access_review(body)
                return
            if url.path == "/version":
                self._send(200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0"})
                return
            m = _PATH.match(url.path)
            if m is None:
                self._send(404, status(404, "NotFound", "the server could not find the requested resource"))
                return
            coll, name, sub = m.group("coll"), m.group("name"), m.group("sub")
            if name is None:
                self._collection(coll, query, body, headers)
            else:
                self._object(coll, name, sub, body, headers)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        # -- reviews (authentication.k8s.io/v1, authorization.k8s.io/v1) ------------------------

        def _token_review(self, body: Any) -> None:
            token = ((body or {}).get("spec") or {}).get("token", "")
            user = fake.users.get(token)
            status: dict[str, Any] = (
                {"authenticated": True, "user": user} if user is not None else {"user": {}, "error": "invalid token"}
            )
            answer = {**body, "metadata": {"creationTimestamp": None}, "status": status}
            self._send(201, answer)

        def _access_review(self, body: Any) -> None:
            spec = (body or {}).get("spec") or {}
            with fake.lock:
                allowed = fake._allowed(spec)
                reason = fake.deny_reason
            status: dict[str, Any] = {"allowed": True} if allowed else {"allowed": False}
            if not allowed and reason:
                status["reason"] = reason
            self._send(201, {**body, "metadata": {"creationTimestamp": None}, "status": status})

        # -- collections ---------------------------------------------------------------------

        def _collection(self, coll: str, query: dict[str, str], body: Any, headers: dict[str, str]) -> None:
            if self.command == "GET" and query.get("watch") == "true":
                self._watch(coll, query.get("resourceVersion"))
            elif self.command == "GET":
                self._list(coll, query)
            elif self.command == "POST":
                self._create(coll, body)
            else:
                self._send(405, status(405, "MethodNotAllowed", f"the server does not allow this method on {coll}"))

        def _list(self, coll: str, query: dict[str, str]) -> None:
            cont = query.get("continue")
            if cont and fake.continue_expired:
                msg = (
                    "The provided continue parameter is too old to display a consistent list result. You can start"
                    " a new list without the continue parameter, or use the continue token in this response to"
                    " retrieve the remainder of the results."
                )
                self._send(410, status(410, "Expired", msg))
                return
            with fake.lock:
                items = [copy.deepcopy(o) for _, o in sorted(fake.store[coll].items())]
                rv = str(fake.rv)
            start = int(cont) if cont else 0
            limit = int(query.get("limit") or 0) or len(items) or 1
            page = items[start : start + limit]
            for o in page:  # typed lists carry no kind/apiVersion on their items
                o.pop("kind", None)
                o.pop("apiVersion", None)
            meta: dict[str, Any] = {"resourceVersion": rv}
            if start + limit < len(items):
                meta["continue"] = str(start + limit)
                meta["remainingItemCount"] = len(items) - start - limit
            self._send(200, {"kind": "List", "apiVersion": "v1", "metadata": meta, "items": page})

        def _create(self, coll: str, body: Any) -> None:
            name = body["metadata"]["name"]
            with fake.lock:
                if name in fake.store[coll]:
                    answer = status(
                        409,
                        "AlreadyExists",
                        f'{_plural(coll)} "{name}" already exists',
                        {"name": name, "kind": _plural(coll)},
                    )
                    code = 409
                else:
                    obj = copy.deepcopy(body)
                    obj["metadata"]["resourceVersion"] = fake.bump()
                    obj["metadata"].setdefault("uid", str(uuid.uuid4()))
                    fake.store[coll][name] = obj
                    code, answer = 201, obj
            self._send(code, answer)

        # -- objects -------------------------------------------------------------------------

        def _not_found(self, coll: str, name: str) -> None:
            plural = _plural(coll)
            self._send(404, status(404, "NotFound", f'{plural} "{name}" not found', {"name": name, "kind": plural}))

        def _object(self, coll: str, name: str, sub: str | None, body: Any, headers: dict[str, str]) -> None:
            with fake.lock:
                current = copy.deepcopy(fake.store[coll].get(name))
            if current is None:
                self._not_found(coll, name)
                return
            if sub == "eviction" and self.command == "POST":
                self._evict(coll, name, current, body)
            elif sub == "binding" and self.command == "POST":
                self._bind(coll, name, current, body)
            elif self.command == "GET":
                self._send(200, current)
            elif self.command == "PUT":
                self._put(coll, name, current, body, sub)
            elif self.command == "PATCH":
                self._patch(coll, name, current, body, headers)
            elif self.command == "DELETE":
                with fake.lock:
                    fake.store[coll].pop(name, None)
                self._send(200, current)
            else:
                self._send(405, status(405, "MethodNotAllowed", "method not allowed"))

        def _put(self, coll: str, name: str, current: dict[str, Any], body: Any, sub: str | None) -> None:
            sent_rv = (body.get("metadata") or {}).get("resourceVersion")
            if sent_rv != current["metadata"]["resourceVersion"]:
                msg = (
                    f'Operation cannot be fulfilled on {_plural(coll)} "{name}": the object has been modified;'
                    " please apply your changes to the latest version and try again"
                )
                self._send(409, status(409, "Conflict", msg, {"name": name, "kind": _plural(coll)}))
                return
            obj = {**current, "status": body.get("status")} if sub == "status" else copy.deepcopy(body)
            with fake.lock:
                obj["metadata"] = {**obj["metadata"], "resourceVersion": fake.bump()}
                fake.store[coll][name] = obj
            self._send(200, obj)

        def _patch(self, coll: str, name: str, current: dict[str, Any], body: Any, headers: dict[str, str]) -> None:
            if headers.get("content-type") == "application/json-patch+json":
                try:
                    obj = jsonpatch.apply_patch(current, body)
                except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
                    self._send(422, status(422, "Invalid", f"the server rejected our request due to an error: {exc}"))
                    return
                with fake.lock:
                    obj["metadata"]["resourceVersion"] = fake.bump()
                    fake.store[coll][name] = obj
                self._send(200, obj)
                return
            if headers.get("content-type") != "application/merge-patch+json":
                ctype = headers.get("content-type")
                self._send(
                    415,
                    status(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {ctype}"),
                )
                return

            def merge(target: Any, patch: Any) -> Any:
                if not isinstance(patch, dict):
                    return patch
                out = dict(target) if isinstance(target, dict) else {}
                for k, v in patch.items():
                    if v is None:
                        out.pop(k, None)
                    else:
                        out[k] = merge(out.get(k), v)
                return out

            obj = merge(current, body)
            with fake.lock:
                obj["metadata"]["resourceVersion"] = fake.bump()
                fake.store[coll][name] = obj
            self._send(200, obj)

        def _evict(self, coll: str, name: str, pod: dict[str, Any], body: Any) -> None:
            uid = ((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
            if uid and uid != pod["metadata"]["uid"]:
                msg = f"Precondition failed: UID in precondition: {uid}, UID in object meta: {pod['metadata']['uid']}"
                self._send(409, status(409, "Conflict", msg, {"name": name, "kind": "pods"}))
                return
            if (pod["metadata"].get("labels") or {}).get("pdb") == "blocked":
                details = {
                    "causes": [
                        {
                            "reason": "DisruptionBudget",
                            "message": "The disruption budget web-pdb needs 2 healthy pods and has 2 currently",
                        }
                    ],
                    "retryAfterSeconds": 10,
                }
                msg = "Cannot evict pod as it would violate the pod's disruption budget."
                self._send(429, status(429, "TooManyRequests", msg, details), {"Retry-After": "10"})
                return
            blocked = fake.take_disruption(pod)
            if blocked is not None:
                details = {"causes": [{"reason": "DisruptionBudget", "message": blocked}]}
                msg = "Cannot evict pod as it would violate the pod's disruption budget."
                self._send(429, status(429, "TooManyRequests", msg, details))
                return
            with fake.lock:
                fake.store[coll].pop(name, None)
            self._send(201, success())

        def _bind(self, coll: str, name: str, pod: dict[str, Any], body: Any) -> None:
            bound = (pod.get("spec") or {}).get("nodeName")
            if body["metadata"].get("uid") and body["metadata"]["uid"] != pod["metadata"]["uid"]:
                self._send(409, status(409, "Conflict", "Precondition failed: UID in precondition does not match"))
                return
            if bound:
                msg = f'pod {name} is already assigned to node "{bound}"'
                self._send(409, status(409, "Conflict", msg, {"name": name, "kind": "pods"}))
                return
            with fake.lock:
                pod = fake.store[coll][name]
                pod.setdefault("spec", {})["nodeName"] = body["target"]["name"]
                pod["metadata"]["resourceVersion"] = fake.bump()
            self._send(201, success())

        # -- watch ---------------------------------------------------------------------------

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def _watch(self, coll: str, since: str | None = None) -> None:
            with fake.lock:
                scripts = fake.watch_scripts[coll]
                script = scripts.pop(0) if scripts else WatchScript(end="hold")
                fake.open_watches += 1
                # published events newer than the watch's resourceVersion (all later ones without it)
                events = fake.published[coll]
                seen = len(events)
                if since and since.isdigit():
                    newer = (
                        i for i, e in enumerate(events) if int(e["object"]["metadata"]["resourceVersion"]) > int(since)
                    )
                    seen = next(newer, seen)
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for line in script.lines:
                    self._chunk(line if isinstance(line, bytes) else json.dumps(line).encode() + b"\n")
                if script.end == "clean":
                    self.wfile.write(b"0\r\n\r\n")
                elif script.end == "break":
                    self.close_connection = True
                else:  # hold: until the client hangs up or the fake closes
                    self.connection.settimeout(0.05)
                    while not fake.closed.is_set():
                        with fake.lock:
                            news = fake.published[coll][seen:]
                            seen += len(news)
                        for event in news:
                            self._chunk(json.dumps(event).encode() + b"\n")
                        try:
                            if self.connection.recv(1) == b"":
                                break
                        except TimeoutError:
                            continue
                        except OSError:
                            break
                    self.close_connection = True
            except OSError:
                self.close_connection = True
            finally:
                with fake.lock:
                    fake.open_watches -= 1

    return Handler


def wait_until(cond: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)
