"""Objects as compact JSON bytes: how the service keeps objects it holds but seldom reads.

A decoded Kubernetes object costs about five times its JSON size in Python objects (every map,
list and string is a separate allocation of 50-250 bytes). The Kubernetes source keeps LIST pages
as JSON bytes (:func:`encode_object`) until the cache takes them, one at a time; the cache keeps
its raw Pods, Nodes and NodeMetrics for as long as they exist, so it keeps them packed
(:func:`pack_object`): the same JSON compressed with Zstandard, 40-60 % of its size (a 650-byte
pod packs to ~400 bytes, a 2.2 KB Node to ~900, a 1.9 KB pod of a real cluster to ~940) for 9-18 us
per object on write and 3-7 us on read (measured with zstandard 0.25, level 1). Pods and NodeMetrics
wait as plain JSON first and are packed in batches (:mod:`app.cache.encodedobjects`); a reader of
either form calls :func:`decode_stored`.
"""

from __future__ import annotations

import threading
from typing import Any

import orjson
import zstandard

#: YAML files give timestamps as datetimes and may give non-string keys; both encode the way
#: the API server would print them (RFC 3339 with ``Z``; keys as strings).
_OPTIONS = orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS

#: What :func:`encode_json` tries first: orjson's default path, which refuses (instead of writing) every
#: value the :data:`_OPTIONS` would change: a datetime, date or time (passed through to no ``default``)
#: and a key that is not exactly a ``str``. For an object decoded from JSON (everything a watch or a LIST
#: brings) it writes the same bytes as :data:`_OPTIONS` in ~70 % of the time (OPT_NON_STR_KEYS is
#: orjson's slow path: a 2.4 KB pod 8.5 -> 6.1 us, orjson 3.13).
_FAST_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME


def encode_json(obj: Any) -> bytes:
    """``obj`` as compact JSON bytes, exactly as ``orjson.dumps(obj, option=_OPTIONS)`` writes them: tried
    first without the options (:data:`_FAST_OPTIONS`), again with them when that refuses ``obj``. orjson's
    own result (a ``bytes`` that may keep a larger buffer): what is hashed or spliced, not stored.

    Raises:
        orjson.JSONEncodeError: ``obj`` holds a value JSON cannot carry (a set, bytes, an arbitrary
            object, an integer beyond 64 bits).
    """
    try:
        return orjson.dumps(obj, option=_FAST_OPTIONS)
    except orjson.JSONEncodeError:
        return orjson.dumps(obj, option=_OPTIONS)


def encode_object(obj: Any) -> bytes:
    """``obj`` (JSON-shaped: dicts, lists, strings, numbers, booleans, None, datetimes) as UTF-8
    JSON bytes of exactly its size (:func:`encode_json`'s bytes).

    orjson's own result keeps its whole output buffer (4 KB and up, measured with orjson 3.13);
    the exact-size copy made here is what makes stored objects small.

    Raises:
        TypeError: ``obj`` holds a value JSON cannot carry (a set, bytes, an arbitrary object).
    """
    try:
        encoded = encode_json(obj)
    except orjson.JSONEncodeError as exc:
        raise TypeError(f"not JSON-shaped: {exc}") from None
    return bytes(memoryview(encoded))


def decode_object(data: bytes) -> Any:
    """The JSON value of ``data`` as fresh Python objects (a datetime comes back as its RFC 3339 string).

    Raises:
        ValueError: ``data`` is not JSON (``orjson.JSONDecodeError`` is a ValueError).
    """
    return orjson.loads(data)


#: Zstandard level of :func:`pack_object`: 1 packs Kubernetes objects within 2 % of level 3 (the
#: library's default) and ~15 % faster (651 -> 394 bytes in 9 us, a 1.9 KB pod -> 938 in 17 us);
#: negative (fast) levels save a few microseconds but keep 80-90 % of the bytes.
PACK_LEVEL = 1


class _Codecs(threading.local):
    """One Zstandard compressor and decompressor per thread: their instances are not thread-safe."""

    def __init__(self) -> None:
        self.compressor = zstandard.ZstdCompressor(level=PACK_LEVEL, write_checksum=False, write_content_size=True)
        self.decompressor = zstandard.ZstdDecompressor()


_CODECS = _Codecs()


def pack_object(obj: Any) -> bytes:
    """``obj`` (as :func:`encode_object` takes it) as Zstandard-compressed compact JSON: a frame with
    its content size, no checksum, no dictionary. Read it back with :func:`unpack_object`.

    Raises:
        TypeError: ``obj`` holds a value JSON cannot carry.
    """
    return pack_encoded(encode_object(obj))


def pack_encoded(encoded: bytes) -> bytes:
    """JSON bytes (:func:`encode_object`'s) packed as :func:`pack_object` packs the object they encode."""
    # the compressor's result keeps a buffer of the worst-case size (larger than the JSON): copy it exactly
    return bytes(memoryview(_CODECS.compressor.compress(encoded)))


#: The first bytes of every Zstandard frame (RFC 8878); a JSON text cannot start with them.
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def decode_stored(data: bytes) -> Any:
    """The JSON value of ``data``, packed (:func:`pack_object`) or plain (:func:`encode_object`), told apart
    by the Zstandard frame's magic number.

    Raises:
        ValueError: ``data`` is neither a packed object nor JSON.
    """
    if data[:4] == _ZSTD_MAGIC:
        return unpack_object(data)
    return orjson.loads(data)


def stored_json(data: bytes) -> bytes:
    """The plain JSON bytes of ``data``, packed (:func:`pack_object`) or plain (:func:`encode_object`):
    to compare a stored object with :func:`encode_object` of another without decoding either.

    Raises:
        ValueError: ``data`` is a Zstandard frame that does not decompress.
    """
    if data[:4] != _ZSTD_MAGIC:
        return data
    try:
        return bytes(_CODECS.decompressor.decompress(data))
    except zstandard.ZstdError as exc:
        raise ValueError(f"not a packed object: {exc}") from None


def unpack_object(data: bytes) -> Any:
    """The JSON value packed in ``data`` by :func:`pack_object`, as fresh Python objects.

    Raises:
        ValueError: ``data`` is not a Zstandard frame of JSON (``zstandard.ZstdError`` is re-raised
            as ValueError, as ``orjson.JSONDecodeError`` already is one).
    """
    try:
        encoded = _CODECS.decompressor.decompress(data)
    except zstandard.ZstdError as exc:
        raise ValueError(f"not a packed object: {exc}") from None
    return orjson.loads(encoded)
