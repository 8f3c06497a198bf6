"""Cluster objects as written in manifest files: YAML/JSON, several documents, ``kind: List``.

The one reader of the embedded mode's cluster files, shared by the file source
(:class:`app.sources.files.FileSource`) and the agent's file states, so both see the same objects:

- a file holds one object, several YAML documents, or a ``kind: List`` / ``<Kind>List`` as
  ``kubectl get ... -o yaml`` prints (items without ``kind`` take the list's);
- a directory is read recursively (``*.yaml``, ``*.yml``, ``*.json``), files in sorted order;
- Pods without ``metadata.uid`` get a stable uid derived from ``namespace/name`` (uuid5).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson
import yaml

from app.api.kinds import object_key

SUFFIXES = (".yaml", ".yml", ".json")


class ManifestError(Exception):
    """The cluster files cannot be read or parsed; the message names the file (and document)."""


def _documents(path: Path) -> list[Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        if path.suffix == ".json":
            return [orjson.loads(text)]
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except (yaml.YAMLError, orjson.JSONDecodeError) as exc:
        raise ManifestError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}") from None


def _flatten(doc: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(doc, dict):
        raise ManifestError(f"{where}: expected an object with apiVersion and kind, got {type(doc).__name__}")
    kind = doc.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
        item_kind = kind[: -len("List")] if kind != "List" else None
        out: list[dict[str, Any]] = []
        for i, item in enumerate(doc["items"]):
            if isinstance(item, dict) and item_kind and "kind" not in item:
                item = {**item, "kind": item_kind}
            out.extend(_flatten(item, f"{where} items[{i}]"))
        return out
    if not isinstance(kind, str) or not kind:
        raise ManifestError(f"{where}: missing kind")
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise ManifestError(f"{where}: {kind} without metadata.name")
    return [doc]


def files_under(path: Path) -> list[Path]:
    """The cluster files at ``path`` (itself if a file), sorted.

    Raises:
        ManifestError: ``path`` does not exist.
    """
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
    raise ManifestError(f"{path}: no such file or directory")


def load_objects(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Read every object under ``path``, grouped as kind -> key -> object.

    Raises:
        ManifestError: a file is unreadable or malformed (the message names it).
    """
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for file in files_under(path):
        for i, doc in enumerate(_documents(file)):
            for obj in _flatten(doc, f"{file} document {i + 1}"):
                kind = obj["kind"]
                if kind == "Pod":
                    meta = obj["metadata"]
                    if not meta.get("uid"):
                        ns = meta.get("namespace") or "default"
                        obj = {
                            **obj,
                            "metadata": {**meta, "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{ns}/{meta['name']}"))},
                        }
                out.setdefault(kind, {})[object_key(obj)] = obj
    return out
