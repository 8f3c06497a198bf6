"""Objects kept as JSON bytes, packed (:func:`~app.api.jsonbytes.pack_object`) after a short wait, and
decoded on read: the cache's store of raw Pods and NodeMetrics.

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

Compression waits: an object is stored as plain compact JSON when written, and the plain ones are
compressed together once they add up to :data:`YOUNG_BYTES`. A pod's watch events come in a burst
(created, bound, the kubelet's first status), so most versions are replaced before their turn and
never compressed: one compression per pod instead of three in ``bench/cyclecode.py``, ~13 us each
at ~2 KB, and those left are compressed back to back rather than one per event after an idle wait.

Held versions: a version its writer expects to be replaced soon (a pending pod, which its Binding
replaces; :meth:`EncodedObjects.put` with ``held``) waits as plain JSON past the young budget, until the
held versions themselves add up to :data:`HELD_BYTES`. A burst of new pods (a Job, a Deployment scaled
up, ``bench/cycle.py``'s 1,000 at once) is larger than the young budget, so without it most of the
pending versions were compressed (~18 us each at ~2 KB) just before their binding replaced them: about
1.7 compressions per scheduled pod in ``bench/cycle.py`` instead of one (issue 29).
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

from app.api.jsonbytes import decode_stored, encode_object, pack_encoded


class UnencodableObject(ValueError):
    """An object holds a value JSON cannot carry (a YAML set, binary data); the message names the key."""


#: Bytes of plain (not yet compressed) JSON an :class:`EncodedObjects` holds before it compresses them:
#: ~900 pod versions of ~2.3 KB, a few seconds of a busy cluster's pod events.
YOUNG_BYTES = 2 * 1024 * 1024

#: Bytes of plain JSON of held versions (:meth:`EncodedObjects.put` ``held``) kept uncompressed at most:
#: ~3,500 pending pods of ~2.3 KB; past it every held version is compressed.
HELD_BYTES = 8 * 1024 * 1024


class EncodedObjects(MutableMapping[str, dict[str, Any]]):
    """A ``key -> JSON object`` mapping stored as JSON bytes: compact orjson, Zstandard-compressed once
    the plain ones reach ``young_bytes`` (see the module docstring).

    ``store[key] = obj`` encodes ``obj`` (a JSON-shaped dict) at once; ``store.put(key, obj, held=True)``
    does too, for a version to be replaced soon (see the module docstring); ``store[key]`` and
    ``store.get(key)`` decode a new dict on each call. Iteration, ``len`` and ``in`` do not decode.
    A datetime (as YAML loads an unquoted timestamp) reads back as its RFC 3339 string. A read tells
    the two forms apart by their bytes (:func:`~app.api.jsonbytes.decode_stored`), so a read from
    another thread is never confused by a compression on the event loop's.

    Args:
        young_bytes: plain JSON bytes held before they are compressed together (0: at once).
        held_bytes: plain JSON bytes of held versions kept before they are compressed together.

    Raises:
        UnencodableObject: on assignment of a value JSON cannot carry (nothing is stored).
        KeyError: on reading or deleting a missing key, as a dict does.
    """

    __slots__ = ("_data", "_held", "_held_size", "_young", "_young_size", "held_bytes", "young_bytes")

    def __init__(self, young_bytes: int = YOUNG_BYTES, held_bytes: int = HELD_BYTES) -> None:
        self._data: dict[str, bytes] = {}
        self._young: dict[str, None] = {}  # keys stored as plain JSON, in write order
        self._young_size = 0  # their bytes, counted when written (a replaced version still counts)
        self._held: dict[str, int] = {}  # keys of held versions (plain JSON) -> their bytes
        self._held_size = 0  # the sum of _held's values: what the held versions take now
        self.young_bytes = young_bytes
        self.held_bytes = held_bytes

    def __getitem__(self, key: str) -> dict[str, Any]:
        decoded: dict[str, Any] = decode_stored(self._data[key])
        return decoded

    def __setitem__(self, key: str, value: dict[str, Any]) -> None:
        self.put(key, value)

    def put(self, key: str, value: dict[str, Any], held: bool = False) -> None:
        """``store[key] = value``; with ``held``, a version expected to be replaced soon (a pending pod): it
        stays plain JSON until the held versions reach ``held_bytes`` (then they are all compressed),
        whatever the young budget does.

        Raises:
            UnencodableObject: ``value`` holds a value JSON cannot carry (nothing is stored).
        """
        try:
            data = encode_object(value)
        except TypeError as exc:
            raise UnencodableObject(f"{key}: {exc}") from None
        self._data[key] = data
        heldmap = self._held
        if heldmap:
            size = heldmap.pop(key, None)
            if size is not None:
                self._held_size -= size
        if held:
            self._young.pop(key, None)
            heldmap[key] = len(data)
            self._held_size += len(data)
            if self._held_size >= self.held_bytes:
                self._pack_held()
            return
        self._young[key] = None
        self._young_size += len(data)
        if self._young_size >= self.young_bytes:
            self._pack_young_only()

    def __delitem__(self, key: str) -> None:
        del self._data[key]
        self._young.pop(key, None)
        size = self._held.pop(key, None)
        if size is not None:
            self._held_size -= size

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def pack_young(self) -> None:
        """Compress every object still stored as plain JSON, held versions included (the store does it itself
        past ``young_bytes`` for the young ones, past ``held_bytes`` for the held ones)."""
        self._pack_young_only()
        self._pack_held()

    def _pack_young_only(self) -> None:
        data = self._data
        for key in self._young:
            data[key] = pack_encoded(data[key])
        self._young.clear()
        self._young_size = 0

    def _pack_held(self) -> None:
        data = self._data
        for key in self._held:
            data[key] = pack_encoded(data[key])
        self._held.clear()
        self._held_size = 0

    def encoded(self, key: str) -> bytes | None:
        """The stored bytes of ``key`` (no decode; packed, or plain JSON while young: read them with
        :func:`~app.api.jsonbytes.decode_stored`), or None."""
        return self._data.get(key)
