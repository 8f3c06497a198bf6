"""``koord snapshot``: a live cluster as cluster files, the format ``koord scheduler --cluster DIR`` reads.

What is read (through the project's one API client, :class:`app.client.sync.Client`, paginated LISTs):
the kinds of :data:`~app.server.snapshot_routes.SNAPSHOT_KINDS` cluster-wide, and in ``koordinator-system``
only the ConfigMaps of :data:`~app.server.snapshot_routes.KOORDINATOR_CONFIGMAPS` (each by name: no other
ConfigMap and no Secret is ever requested).
A kind whose collection the API server does not serve (its CRD not installed: 404) or RBAC refuses
(403) is skipped and named in :attr:`Snapshot.skipped`.

What is written: one ``<plural>.json`` per kind (a ``kind: List``), ``configmaps.json`` for the
ConfigMaps found. Pods keep only what the plugins read (:func:`app.api.podfields.trim_pod`); what
was dropped is counted per field path in :attr:`Snapshot.dropped`. Nodes keep their metadata without
``managedFields`` and annotations outside Koordinator's domains.

NodeMetrics: a metric fresh when the snapshot is taken (``status.updateTime`` no older than
LoadAwareScheduling's ``nodeMetricExpirationSeconds`` of the configuration in use, 180 s by default)
loses its ``updateTime`` and is annotated ``koordinator-py.io/stamp-update-time: "true"`` (the file
source then stamps it when loaded: the node agent is taken as still reporting those values); its
original time is kept in ``koordinator-py.io/snapshot-update-time``. A metric already expired keeps
its ``updateTime``, so it stays expired, as it was.

The plugin configuration in use is the ``config.yaml`` of the ConfigMap
``koordinator-system/koord-scheduler-extender-config`` (manifests/base/scheduler-plugins-config.yaml),
written with the other ConfigMaps; ``koord sim whatif`` reads it from there (:func:`snapshot_config`).
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from app.api.kinds import KINDS
from app.api.manifests import SafeLoader
from app.api.podfields import kept_annotation, trim_pod
from app.api.timeparse import parse_time
from app.client.errors import Forbidden, NotFound
from app.server.snapshot_routes import KOORDINATOR_CONFIGMAPS, SNAPSHOT_KINDS
from app.sources.files import ANNOTATION_STAMP_UPDATE_TIME

#: Koordinator's namespace; the only ConfigMaps read there (by name) are
#: :data:`~app.server.snapshot_routes.KOORDINATOR_CONFIGMAPS`.
KOORDINATOR_NAMESPACE = "koordinator-system"
#: The extender's plugin configuration (its ``config.yaml`` key).
PLUGIN_CONFIGMAP = "koord-scheduler-extender-config"
PLUGIN_CONFIG_KEY = "config.yaml"
#: Where a fresh NodeMetric's original ``status.updateTime`` is kept.
ANNOTATION_SNAPSHOT_UPDATE_TIME = "koordinator-py.io/snapshot-update-time"
#: LoadAwareScheduling's default ``nodeMetricExpirationSeconds`` (upstream defaults.go).
DEFAULT_NODE_METRIC_EXPIRATION_SECONDS = 180.0


class SnapshotError(RuntimeError):
    """The snapshot cannot be taken or written (the message says what and where)."""


@dataclass
class Snapshot:
    """A cluster as read, ready to be written.

    Attributes:
        objects: kind -> objects (each with ``kind`` and ``apiVersion``), pods already trimmed.
        configmaps: Koordinator's own ConfigMaps found (of :data:`KOORDINATOR_CONFIGMAPS`).
        dropped: field path -> how many times it was dropped (pods, nodes).
        skipped: kind -> why it is not in the snapshot (not served, forbidden).
        taken_at: when the reading started (seconds since the epoch).
        fresh_metrics / expired_metrics: NodeMetrics stamped as live / left expired.
    """

    objects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    configmaps: list[dict[str, Any]] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)
    skipped: dict[str, str] = field(default_factory=dict)
    taken_at: float = 0.0
    fresh_metrics: int = 0
    expired_metrics: int = 0

    def counts(self) -> dict[str, int]:
        """Objects per kind (ConfigMaps included)."""
        out = {kind: len(objs) for kind, objs in self.objects.items()}
        out["ConfigMap"] = len(self.configmaps)
        return out

    def summary(self) -> dict[str, Any]:
        """What ``koord snapshot -o json`` prints: counts, skipped kinds, dropped fields (most first),
        NodeMetrics stamped fresh and left expired."""
        return {
            "objects": self.counts(),
            "skipped": dict(self.skipped),
            "dropped": dict(sorted(self.dropped.items(), key=lambda kv: (-kv[1], kv[0]))),
            "nodeMetrics": {"fresh": self.fresh_metrics, "expired": self.expired_metrics},
        }


def _with_kind(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """``obj`` with ``kind`` and ``apiVersion`` (typed lists leave them out of their items)."""
    info = KINDS[kind]
    if obj.get("kind") == kind and obj.get("apiVersion"):
        return obj
    return {"apiVersion": info.api_version, "kind": kind, **{k: v for k, v in obj.items() if k not in ("kind",)}}


def trim_node(node: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A Node without ``metadata.managedFields`` and without annotations outside Koordinator's domains
    (the plugins read ``node.koordinator.sh/...`` ones); (the node, the dropped field paths)."""
    meta = node.get("metadata")
    if not isinstance(meta, dict):
        return node, []
    dropped: list[str] = []
    out_meta = {k: v for k, v in meta.items() if k not in ("managedFields", "annotations")}
    if "managedFields" in meta:
        dropped.append("Node metadata.managedFields")
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        kept = {k: v for k, v in annotations.items() if kept_annotation(k)}
        dropped.extend(f"Node metadata.annotations[{k}]" for k in annotations if k not in kept)
        if kept:
            out_meta["annotations"] = kept
    return {**node, "metadata": out_meta}, dropped


def metric_expiration_seconds(config: dict[str, Any] | None) -> float:
    """LoadAwareScheduling's ``nodeMetricExpirationSeconds`` in the plugin configuration mapping
    ``config`` (:data:`DEFAULT_NODE_METRIC_EXPIRATION_SECONDS` when it sets none or is unreadable)."""
    for entry in (config or {}).get("pluginConfig") or []:
        if isinstance(entry, dict) and entry.get("name") == "LoadAwareScheduling":
            value = (entry.get("args") or {}).get("nodeMetricExpirationSeconds")
            if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                return float(value)
    return DEFAULT_NODE_METRIC_EXPIRATION_SECONDS


def stamp_metric(metric: dict[str, Any], now: float, expiration: float) -> tuple[dict[str, Any], bool]:
    """A NodeMetric as the snapshot keeps it (see the module docstring) and whether it was fresh."""
    status = metric.get("status") if isinstance(metric.get("status"), dict) else None
    updated = status.get("updateTime") if status else None
    if not isinstance(updated, str) or status is None:
        return metric, False
    try:
        age = now - parse_time(updated)
    except ValueError:
        return metric, False
    if age > expiration:
        return metric, False
    meta = dict(metric.get("metadata") or {})
    meta.pop("managedFields", None)
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        ANNOTATION_STAMP_UPDATE_TIME: "true",
        ANNOTATION_SNAPSHOT_UPDATE_TIME: updated,
    }
    return {**metric, "metadata": meta, "status": {k: v for k, v in status.items() if k != "updateTime"}}, True


def plugin_config_of(configmaps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The plugin configuration mapping in the ``config.yaml`` of :data:`PLUGIN_CONFIGMAP` among
    ``configmaps``; None when absent.

    Raises:
        SnapshotError: the ConfigMap holds a ``config.yaml`` that is not a YAML mapping.
    """
    for cm in configmaps:
        meta = cm.get("metadata") or {}
        if (
            meta.get("name") == PLUGIN_CONFIGMAP
            and meta.get("namespace", KOORDINATOR_NAMESPACE) == KOORDINATOR_NAMESPACE
        ):
            text = (cm.get("data") or {}).get(PLUGIN_CONFIG_KEY)
            if text is None:
                return None
            try:
                data = yaml.load(text, Loader=SafeLoader)
            except yaml.YAMLError as exc:
                raise SnapshotError(f"ConfigMap {KOORDINATOR_NAMESPACE}/{PLUGIN_CONFIGMAP}: not YAML: {exc}") from None
            if data is None:
                return {}
            if not isinstance(data, dict):
                raise SnapshotError(
                    f"ConfigMap {KOORDINATOR_NAMESPACE}/{PLUGIN_CONFIGMAP}: {PLUGIN_CONFIG_KEY} is not a mapping"
                )
            return data
    return None


def build_snapshot(
    objects: dict[str, list[dict[str, Any]]],
    configmaps: list[dict[str, Any]],
    *,
    taken_at: float,
    skipped: dict[str, str] | None = None,
) -> Snapshot:
    """Trim and stamp what was read (``objects`` by kind, Koordinator's ``configmaps``) into a :class:`Snapshot`.

    Raises:
        SnapshotError: the plugin configuration ConfigMap is malformed.
    """
    snap = Snapshot(taken_at=taken_at, skipped=dict(skipped or {}))
    snap.configmaps = [_with_kind(cm, "ConfigMap") for cm in configmaps]
    for cm in snap.configmaps:
        meta = dict(cm.get("metadata") or {})
        if meta.pop("managedFields", None) is not None:
            cm["metadata"] = meta
    expiration = metric_expiration_seconds(plugin_config_of(snap.configmaps))
    for kind in SNAPSHOT_KINDS:
        if kind not in objects:
            continue
        out: list[dict[str, Any]] = []
        for raw in objects[kind]:
            obj = _with_kind(raw, kind)
            if kind == "Pod":
                obj, dropped = trim_pod(obj)
                snap.dropped.update(dropped)
            elif kind == "Node":
                obj, dropped = trim_node(obj)
                snap.dropped.update(dropped)
            elif kind == "NodeMetric":
                obj, fresh = stamp_metric(obj, taken_at, expiration)
                if fresh:
                    snap.fresh_metrics += 1
                else:
                    snap.expired_metrics += 1
            else:
                other = obj.get("metadata")
                if isinstance(other, dict) and "managedFields" in other:
                    obj = {**obj, "metadata": {k: v for k, v in other.items() if k != "managedFields"}}
            out.append(obj)
        snap.objects[kind] = out
    return snap


#: Reads one collection: (kind, API path) -> its items. Raises the client's typed errors.
Lister = Callable[[str, str], list[dict[str, Any]]]


def read_cluster(client: Any, progress: Callable[[str, int], None] | None = None) -> Snapshot:
    """Read the cluster through ``client`` (an :class:`app.client.sync.Client`): every kind of
    :data:`SNAPSHOT_KINDS` by paginated LIST, and Koordinator's ConfigMaps by name. ``progress`` is called
    with each kind and how many objects it had.

    Raises:
        ApiError / ConnectionFailed: the API server refused a Node or Pod list, or did not answer.
        SnapshotError: the plugin configuration ConfigMap is malformed.
    """
    taken_at = time.time()
    collecting = gc.isenabled()
    gc.disable()  # every object read lives until written: collections during the read only cost
    try:
        return _read_cluster(client, taken_at, progress)
    finally:
        if collecting:
            gc.enable()


def _read_cluster(client: Any, taken_at: float, progress: Callable[[str, int], None] | None) -> Snapshot:
    objects: dict[str, list[dict[str, Any]]] = {}
    skipped: dict[str, str] = {}
    for kind in SNAPSHOT_KINDS:
        info = KINDS[kind]
        try:
            items = client.list(info.collection_path()).items
        except (NotFound, Forbidden) as exc:
            if kind in ("Node", "Pod"):
                raise
            skipped[kind] = f"{type(exc).__name__}: {exc}"
            continue
        objects[kind] = items
        if progress is not None:
            progress(kind, len(items))
    configmaps: list[dict[str, Any]] = []
    cm_path = KINDS["ConfigMap"].collection_path(KOORDINATOR_NAMESPACE)
    for name in KOORDINATOR_CONFIGMAPS:
        try:
            configmaps.append(client.get(f"{cm_path}/{name}"))
        except (NotFound, Forbidden) as exc:
            skipped[f"ConfigMap {KOORDINATOR_NAMESPACE}/{name}"] = f"{type(exc).__name__}: {exc}"
    return build_snapshot(objects, configmaps, taken_at=taken_at, skipped=skipped)


def file_name(kind: str) -> str:
    """``<plural>.json``: the file a kind is written to."""
    return f"{KINDS[kind].plural}.json"


def write_snapshot(snap: Snapshot, directory: Path) -> list[Path]:
    """Write ``snap`` under ``directory`` (created if needed): one ``kind: List`` JSON file per kind that has
    objects, ConfigMaps in ``configmaps.json``. Files of an earlier snapshot for kinds now empty are removed,
    so the directory holds exactly this snapshot's objects. Returns the files written.

    Raises:
        SnapshotError: ``directory`` cannot be created or a file cannot be written.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SnapshotError(f"{directory}: cannot create: {exc.strerror}") from None
    written: list[Path] = []
    lists = [(kind, snap.objects.get(kind, [])) for kind in SNAPSHOT_KINDS] + [("ConfigMap", snap.configmaps)]
    for kind, items in lists:
        path = directory / file_name(kind)
        try:
            if not items:
                path.unlink(missing_ok=True)
                continue
            body = {"apiVersion": "v1", "kind": "List", "items": items}
            path.write_bytes(orjson.dumps(body, option=orjson.OPT_APPEND_NEWLINE))
        except OSError as exc:
            raise SnapshotError(f"{path}: cannot write: {exc.strerror}") from None
        written.append(path)
    return written


def snapshot_config(directory: Path) -> dict[str, Any] | None:
    """The plugin configuration mapping a snapshot directory holds (the ``config.yaml`` of
    :data:`PLUGIN_CONFIGMAP` in ``configmaps.json``, or in any cluster file there); None without one.

    Raises:
        SnapshotError: the directory cannot be read, or the ConfigMap's config is malformed.
    """
    from app.api.manifests import ManifestError, load_objects

    own = directory / file_name("ConfigMap")
    try:
        objects = load_objects(own if own.is_file() else directory)
    except ManifestError as exc:
        raise SnapshotError(str(exc)) from None
    return plugin_config_of(list(objects.get("ConfigMap", {}).values()))


def config_configmap(config: dict[str, Any]) -> dict[str, Any]:
    """The ConfigMap :data:`PLUGIN_CONFIGMAP` holding the plugin configuration mapping ``config`` as its
    ``config.yaml`` (how the manifests deploy it)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": PLUGIN_CONFIGMAP, "namespace": KOORDINATOR_NAMESPACE},
        "data": {PLUGIN_CONFIG_KEY: yaml.safe_dump(config, sort_keys=False)},
    }


def read_service(answer: dict[str, Any], taken_at: float) -> Snapshot:
    """A :class:`Snapshot` from a koord service's ``GET /apis/v1/snapshot`` answer: its objects, its
    Koordinator ConfigMaps, and the plugin configuration it runs with as :data:`PLUGIN_CONFIGMAP`
    (replacing the cluster's, which may differ from what the service was started with).

    Raises:
        SnapshotError: the answer is not shaped as the endpoint answers.
    """
    objects = answer.get("objects")
    configmaps = answer.get("configmaps") or []
    config = answer.get("config")
    if not isinstance(objects, dict) or not isinstance(configmaps, list) or not isinstance(config, dict):
        raise SnapshotError("the service's /apis/v1/snapshot answer lacks objects, configmaps or config")
    kept = [
        cm for cm in configmaps if isinstance(cm, dict) and (cm.get("metadata") or {}).get("name") != PLUGIN_CONFIGMAP
    ]
    lists = {
        k: [o for o in v if isinstance(o, dict)]
        for k, v in objects.items()
        if k in SNAPSHOT_KINDS and isinstance(v, list)
    }
    snap = build_snapshot(lists, [*kept, config_configmap(config)], taken_at=taken_at)
    dropped = answer.get("dropped")
    if isinstance(dropped, dict):
        snap.dropped.update({str(k): int(v) for k, v in dropped.items() if isinstance(v, int)})
    return snap
