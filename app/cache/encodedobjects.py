"""Objects kept as packed JSON bytes (:func:`~app.api.jsonbytes.pack_object`) and decoded on read: the
cache's store of raw Pods and NodeMetrics.

A decoded v1 Pod costs about five times its JSON size in Python objects (every map, list and
string is a separate object of 50-250 bytes), so 100,000 cached pods held as dicts took about
350 MB, most of the service's memory at scale. The scheduling path never reads them: verbs,
accounting and plugins work on :class:`app.cache.podinfo.PodInfo`. The raw object is read only
off the hot path (preemption's victim ordering, DeviceShare's pod shape of the pod being
scheduled, inspection), where decoding ~1 KB of JSON (a few microseconds) is cheap. NodeMetrics
(a per-pod usage list each, ~20 KB decoded) are read by the plugins from the event itself; the
stored copy serves inspection and the manager's once-a-round read per node.

Every read returns a fresh dict, so a caller that edits what it got cannot change the cache
behind its back (client-go's rule that informer objects are read-only, enforced here by copying).
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

from app.api.jsonbytes import pack_object, unpack_object


class UnencodableObject(ValueError):
    """An object holds a value JSON cannot carry (a YAML set, binary data); the message names the key."""


class EncodedObjects(MutableMapping[str, dict[str, Any]]):
    """A ``key -> JSON object`` mapping stored as packed JSON bytes (Zstandard-compressed orjson).

    ``store[key] = obj`` encodes ``obj`` (a JSON-shaped dict) at once; ``store[key]`` and
    ``store.get(key)`` decode a new dict on each call. Iteration, ``len`` and ``in`` do not decode.
    A datetime (as YAML loads an unquoted timestamp) reads back as its RFC 3339 string.

    Raises:
        UnencodableObject: on assignment of a value JSON cannot carry (nothing is stored).
        KeyError: on reading or deleting a missing key, as a dict does.
    """

    __slots__ = ("_data",)

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}

    def __getitem__(self, key: str) -> dict[str, Any]:
        decoded: dict[str, Any] = unpack_object(self._data[key])
        return decoded

    def __setitem__(self, key: str, value: dict[str, Any]) -> None:
        try:
            self._data[key] = pack_object(value)
        except TypeError as exc:
            raise UnencodableObject(f"{key}: {exc}") from None

    def __delitem__(self, key: str) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def encoded(self, key: str) -> bytes | None:
        """The stored bytes of ``key`` (packed JSON, :func:`~app.api.jsonbytes.pack_object`; no decode), or None."""
        return self._data.get(key)
