"""Resource vectors: fixed-order integer lists over the plugin's resource names.

Mirrors ``ResourceVectorizer`` / ``ResourceVector`` of ``helper.go``. Values are cpu milli-cores
and base units for everything else. Names outside the vectorizer are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.api.quantity import QuantityError, resource_value

Vec = list[int]


class Vectorizer:
    """Sorted resource names and conversions between maps and vectors."""

    __slots__ = ("names", "position")

    def __init__(self, names: list[str]) -> None:
        self.names = sorted(names)
        self.position = {n: i for i, n in enumerate(self.names)}

    def __len__(self) -> int:
        return len(self.names)

    def empty(self) -> Vec:
        """A zero vector."""
        return [0] * len(self.names)

    def from_values(self, values: Mapping[str, int]) -> Vec:
        """Vector of already-converted integers (factors, thresholds, or internal resource values)."""
        return [int(values.get(n, 0)) for n in self.names]

    def from_resource_list(self, raw: Any) -> Vec:
        """Vector from a ResourceList of quantity strings; unknown names and bad values are skipped.

        Raises nothing: invalid quantities count as absent (logged by the caller's parser).
        """
        vec = self.empty()
        if not isinstance(raw, dict):
            return vec
        for name, q in raw.items():
            i = self.position.get(name)
            if i is None:
                continue
            try:
                vec[i] = resource_value(name, q)
            except QuantityError:
                continue
        return vec


def add(into: Vec, other: Vec) -> None:
    """``into += other``."""
    for i, v in enumerate(other):
        into[i] += v


def sub(into: Vec, other: Vec) -> None:
    """``into -= other``."""
    for i, v in enumerate(other):
        into[i] -= v


def add_delta(into: Vec, estimated: Vec, used: Vec | None, sign: int = 1) -> bool:
    """``into += sign * max(0, estimated - used)`` per resource; True if anything changed (``AddDelta``)."""
    changed = False
    for i, e in enumerate(estimated):
        d = e - used[i] if used is not None else e
        if d > 0:
            into[i] += sign * d
            changed = True
    return changed


def is_empty(vec: Vec | None) -> bool:
    """True when every element is zero (or the vector is None)."""
    return vec is None or not any(vec)
