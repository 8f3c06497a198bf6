"""Strategic merge patch of a Pod (the ClusterColocationProfile ``spec.patch``).

Follows ``k8s.io/apimachinery/pkg/util/strategicpatch`` for the parts a profile patch uses:

- objects merge key by key; a ``null`` value deletes the key;
- lists with a patch merge key in ``k8s.io/api/core/v1`` (containers by ``name``, volumes by
  ``name``, env by ``name``, ports by ``containerPort``, volumeMounts by ``mountPath``, ...)
  merge item by item on that key, new items appended in patch order;
  ``{"$patch": "delete", <key>: v}`` items delete; other lists are replaced;
- ``$patch: replace`` on an object replaces it; ``$retainKeys`` and ``$setElementOrder``
  directives are dropped (ordering follows the original list).
"""

from __future__ import annotations

from typing import Any

import orjson


class PatchError(ValueError):
    """The patch is not a JSON object or a directive is misused; the message says where."""


#: Patch merge keys of Pod list fields (field name -> key), from k8s.io/api/core/v1 struct tags.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "hostAliases": "ip",
    "ownerReferences": "uid",
    "resourceClaims": "name",
    "topologySpreadConstraints": "topologyKey",
    "readinessGates": "conditionType",
}


def _copy(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))


def _merge_list(field: str, original: list[Any], patch: list[Any], path: str) -> list[Any]:
    key = MERGE_KEYS.get(field)
    if key is None or not all(isinstance(i, dict) for i in original + patch):
        return [_copy(i) for i in patch]
    out = [_copy(i) for i in original]
    for item in patch:
        if key not in item:
            raise PatchError(f"{path}: map in list must contain the merge key {key!r}")
        directive = item.get("$patch")
        idx = next((i for i, o in enumerate(out) if o.get(key) == item[key]), None)
        if directive == "delete":
            if idx is not None:
                out.pop(idx)
            continue
        body = {k: v for k, v in item.items() if k != "$patch"}
        if idx is None:
            out.append(_merge_object({}, body, f"{path}[{key}={item[key]}]"))
        else:
            out[idx] = _merge_object(out[idx], body, f"{path}[{key}={item[key]}]")
    return out


def _merge_object(original: dict[str, Any], patch: dict[str, Any], path: str) -> dict[str, Any]:
    if patch.get("$patch") == "replace":
        return {k: _copy(v) for k, v in patch.items() if k != "$patch"}
    out = _copy(original)
    for name, value in patch.items():
        if name.startswith("$"):
            continue
        if value is None:
            out.pop(name, None)
        elif isinstance(value, dict) and isinstance(out.get(name), dict):
            out[name] = _merge_object(out[name], value, f"{path}.{name}")
        elif isinstance(value, dict):
            out[name] = _merge_object({}, value, f"{path}.{name}")
        elif isinstance(value, list) and isinstance(out.get(name), list):
            out[name] = _merge_list(name, out[name], value, f"{path}.{name}")
        elif isinstance(value, list):
            out[name] = _merge_list(name, [], value, f"{path}.{name}")
        else:
            out[name] = _copy(value)
    return out


def strategic_merge(original: dict[str, Any], patch: Any) -> dict[str, Any]:
    """Apply ``patch`` to ``original`` (a Pod as a JSON-shaped dict) and return a new object.

    Raises:
        PatchError: ``patch`` is not an object, or a list item lacks its merge key.
    """
    if not isinstance(patch, dict):
        raise PatchError(f"patch: expected a JSON object, got {type(patch).__name__}")
    return _merge_object(original, patch, "patch")
