"""Where the agent learns what runs on its node: the embedded cluster files, the API server, or the kubelet.

Follows upstream ``pkg/koordlet/statesinformer/impl`` (``states_pods.go`` reads the kubelet's
``/pods``; ``states_node.go``, ``states_nodeslo.go``, ``states_nodemetric.go`` watch the API server
with a ``metadata.name`` field selector). Providers are synchronous and polled by the agent loop.
"""

from __future__ import annotations

import json
import logging
import ssl
import urllib.request
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.api.kinds import KINDS
from app.api.manifests import ClusterFiles, ManifestError
from app.client.errors import ApiError, NotFound

if TYPE_CHECKING:
    from app.client.sync import Client

log = logging.getLogger("agent.states")

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
SERVICE_ACCOUNT_CA = Path("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")


class StatesError(Exception):
    """The states could not be fetched; the message names the source and the reason."""


class StatesProvider(ABC):
    """The node's pods, Node, NodeSLO and NodeMetric, refreshed on demand.

    Attributes:
        pods: raw pod objects with ``spec.nodeName`` == the node.
        node: the Node object, None when unknown (capacity then comes from the machine).
        node_slo: the NodeSLO named after the node, None when absent (defaults apply).
        node_metric: the NodeMetric named after the node (its spec drives reporting), None when absent.
    """

    def __init__(self, node_name: str) -> None:
        self.node_name = node_name
        self.pods: list[dict[str, Any]] = []
        self.node: dict[str, Any] | None = None
        self.node_slo: dict[str, Any] | None = None
        self.node_metric: dict[str, Any] | None = None

    @abstractmethod
    def refresh(self) -> bool:
        """Fetch again; True when anything changed.

        Raises:
            StatesError: the source could not be read (the previous states are kept).
        """

    @property
    @abstractmethod
    def description(self) -> str:
        """``files:<path>``, ``apiserver:<host>`` or ``kubelet:<url>``."""

    def fetch_pods(self, timeout: float) -> list[dict[str, Any]]:
        """The node's raw pods read from the pod source now, within ``timeout`` seconds, leaving :attr:`pods` and
        the other states alone (the runtime hooks' look at pods the kubelet admitted since the last
        :meth:`refresh`; safe to call from another thread than the one refreshing). This base: the pods of the
        last refresh (a source with nothing fresher to ask).

        Raises:
            StatesError: the source could not be read.
        """
        return list(self.pods)


class FileStates(StatesProvider):
    """The embedded mode: the same cluster files the scheduler service reads, re-read when they change.

    Read through :class:`app.api.manifests.ClusterFiles` as the service reads them: after the first
    good load, a file that turns malformed or empty (a writer caught between truncating and writing)
    keeps its last good objects, so the node's pods never vanish for a moment.
    """

    def __init__(self, node_name: str, cluster: Path) -> None:
        super().__init__(node_name)
        self.cluster = Path(cluster)
        self.files = ClusterFiles(self.cluster)
        self._loaded = False

    @property
    def description(self) -> str:
        """``files:<path>``."""
        return f"files:{self.cluster}"

    def refresh(self) -> bool:
        """Reload when a file changed (inode/mtime/size); the pods are those bound to this node."""
        try:
            if self._loaded and not self.files.changed():
                return False
            objects = self.files.load(strict=not self._loaded)
        except (ManifestError, OSError) as exc:
            raise StatesError(f"{self.description}: {exc}") from None
        self._loaded = True
        self.pods = [
            p for p in objects.get("Pod", {}).values() if (p.get("spec") or {}).get("nodeName") == self.node_name
        ]
        self.node = objects.get("Node", {}).get(self.node_name)
        self.node_slo = objects.get("NodeSLO", {}).get(self.node_name)
        self.node_metric = objects.get("NodeMetric", {}).get(self.node_name)
        return True


def _get_json(client: Client, path: str, params: dict[str, str] | None = None) -> dict[str, Any] | None:
    """GET ``path``: the object, or None when it does not exist (404).

    Raises:
        StatesError: any other refusal, or no answer.
    """
    try:
        return client.get(path, params)
    except NotFound:
        return None
    except ApiError as exc:
        code = f"HTTP {exc.status}: " if exc.status else ""  # ConnectionFailed has none
        raise StatesError(f"GET {path}: {code}{exc}") from None


def _fill_kind(items: list[Any], kind: str, api_version: str) -> list[dict[str, Any]]:
    return [{"kind": kind, "apiVersion": api_version, **i} for i in items if isinstance(i, dict)]


class APIServerStates(StatesProvider):
    """Pods from the API server (``fieldSelector=spec.nodeName=<node>``), or from the kubelet's ``/pods``
    when ``kubelet_url`` is given; Node, NodeSLO and NodeMetric from the API server by name.

    Args:
        client: the agent's API client (:class:`app.client.sync.Client`).
        kubelet_url: e.g. ``https://127.0.0.1:10250``; the request carries the service-account token
            (``kubelet_token``) and verifies with ``kubelet_ca`` unless ``kubelet_insecure``.
    """

    def __init__(
        self,
        node_name: str,
        client: Client,
        *,
        kubelet_url: str | None = None,
        kubelet_token: Path | None = SERVICE_ACCOUNT_TOKEN,
        kubelet_ca: Path | None = SERVICE_ACCOUNT_CA,
        kubelet_insecure: bool = False,
    ) -> None:
        super().__init__(node_name)
        self.client = client
        self.kubelet_url = kubelet_url.rstrip("/") if kubelet_url else None
        self.kubelet_token = kubelet_token
        self.kubelet_ca = kubelet_ca
        self.kubelet_insecure = kubelet_insecure

    @property
    def description(self) -> str:
        """``apiserver:<host>`` (+ ``kubelet:<url>``)."""
        host = self.client.host
        return f"apiserver:{host}" + (f" kubelet:{self.kubelet_url}" if self.kubelet_url else "")

    def _kubelet_pods(self, timeout: float = 10.0) -> list[dict[str, Any]]:
        assert self.kubelet_url is not None
        req = urllib.request.Request(f"{self.kubelet_url}/pods", headers={"Accept": "application/json"})
        if self.kubelet_token is not None and self.kubelet_token.is_file():
            req.add_header("Authorization", f"Bearer {self.kubelet_token.read_text().strip()}")
        ctx: ssl.SSLContext | None = None
        if self.kubelet_url.startswith("https"):
            ctx = ssl.create_default_context()
            if self.kubelet_insecure:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            elif self.kubelet_ca is not None and self.kubelet_ca.is_file():
                ctx.load_verify_locations(str(self.kubelet_ca))
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:
                body = json.loads(resp.read())
        except (OSError, ValueError) as exc:
            raise StatesError(f"kubelet {self.kubelet_url}/pods: {exc}") from None
        return _fill_kind(body.get("items") or [], "Pod", "v1") if isinstance(body, dict) else []

    def fetch_pods(self, timeout: float) -> list[dict[str, Any]]:
        """The node's pods from the kubelet's ``/pods`` when ``kubelet_url`` is set (upstream ``states_pods.go``
        reads them there), else the pods of the last refresh (the API server's list is not asked per hook);
        ``timeout`` seconds at most.

        Raises:
            StatesError: the kubelet did not answer (in time) or answered something else than a pod list.
        """
        if not self.kubelet_url:
            return list(self.pods)
        pods = self._kubelet_pods(timeout)
        return [p for p in pods if (p.get("spec") or {}).get("nodeName") in (None, "", self.node_name)]

    def refresh(self) -> bool:
        """Fetch pods, Node, NodeSLO and NodeMetric; True when anything differs from the last fetch."""
        before = (self.pods, self.node, self.node_slo, self.node_metric)
        if self.kubelet_url:
            pods = self._kubelet_pods()
        else:
            body = _get_json(self.client, "/api/v1/pods", {"fieldSelector": f"spec.nodeName={self.node_name}"})
            items = (body or {}).get("items")
            pods = _fill_kind(items if isinstance(items, list) else [], "Pod", "v1")
        self.pods = [p for p in pods if (p.get("spec") or {}).get("nodeName") in (None, "", self.node_name)]
        self.node = _get_json(self.client, f"/api/v1/nodes/{self.node_name}")
        slo, metric = KINDS["NodeSLO"], KINDS["NodeMetric"]
        self.node_slo = _get_json(self.client, f"{slo.collection_path(None)}/{self.node_name}")
        self.node_metric = _get_json(self.client, f"{metric.collection_path(None)}/{self.node_name}")
        return before != (self.pods, self.node, self.node_slo, self.node_metric)
