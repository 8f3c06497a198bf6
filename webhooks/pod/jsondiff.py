"""A minimal RFC 6902 JSONPatch between two JSON documents, for the mutating webhook's answer.

Objects are diffed key by key (``add`` / ``remove`` / ``replace``), lists of equal length item by
item, lists of different length are replaced whole; unchanged subtrees are skipped with one C-level
``==``. Paths are JSON pointers (``~`` -> ``~0``, ``/`` -> ``~1``, so label keys such as
``koordinator.sh/qosClass`` are escaped). Much cheaper than ``jsonpatch.make_patch``, which searches
for moves and copies; the API server applies either the same way.
"""

from __future__ import annotations

from typing import Any


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _diff(old: Any, new: Any, path: str, ops: list[dict[str, Any]]) -> None:
    if old == new and type(old) is type(new):
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        for key, value in new.items():
            child = f"{path}/{_escape(key)}"
            if key not in old:
                ops.append({"op": "add", "path": child, "value": value})
            else:
                _diff(old[key], value, child, ops)
        return
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            _diff(a, b, f"{path}/{i}", ops)
        return
    ops.append({"op": "replace", "path": path, "value": new})


def make_patch(old: Any, new: Any) -> list[dict[str, Any]]:
    """The operations turning ``old`` into ``new`` (both JSON-shaped; neither is modified)."""
    ops: list[dict[str, Any]] = []
    _diff(old, new, "", ops)
    return ops
