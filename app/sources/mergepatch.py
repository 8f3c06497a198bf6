"""JSON merge patch (RFC 7386), as the API server applies ``application/merge-patch+json``.

Used by the embedded sources to apply the same patches the Kubernetes source sends.
"""

from __future__ import annotations

import copy
from typing import Any


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """Return ``target`` with ``patch`` applied (neither argument is modified).

    A dict patch merges key by key, ``None`` deleting the key; any other patch value replaces
    the target whole (lists included, as RFC 7386 says).
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


def compose_merge_patches(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """One merge patch equivalent to applying ``first`` then ``second``.

    Deletions (``None``) in ``second`` are kept, so the result still deletes on later targets.
    """
    result = dict(first)
    for key, value in second.items():
        prev = result.get(key)
        if isinstance(value, dict) and isinstance(prev, dict):
            result[key] = compose_merge_patches(prev, value)
        else:
            result[key] = copy.deepcopy(value)
    return result
