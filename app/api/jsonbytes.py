"""Objects as compact JSON bytes: how the service keeps objects it holds but seldom reads.

A decoded Kubernetes object costs about five times its JSON size in Python objects (every map,
list and string is a separate allocation of 50-250 bytes). The cache keeps raw Pods this way and
the Kubernetes source keeps LIST pages this way until the cache takes them, one at a time.
"""

from __future__ import annotations

from typing import Any

import orjson

#: YAML files give timestamps as datetimes and may give non-string keys; both encode the way
#: the API server would print them (RFC 3339 with ``Z``; keys as strings).
_OPTIONS = orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS


def encode_object(obj: Any) -> bytes:
    """``obj`` (JSON-shaped: dicts, lists, strings, numbers, booleans, None, datetimes) as UTF-8
    JSON bytes of exactly its size.

    orjson's own result keeps its whole output buffer (4 KB and up, measured with orjson 3.13);
    the exact-size copy made here is what makes stored objects small.

    Raises:
        TypeError: ``obj`` holds a value JSON cannot carry (a set, bytes, an arbitrary object).
    """
    try:
        encoded = orjson.dumps(obj, option=_OPTIONS)
    except orjson.JSONEncodeError as exc:
        raise TypeError(f"not JSON-shaped: {exc}") from None
    return bytes(memoryview(encoded))


def decode_object(data: bytes) -> Any:
    """The JSON value of ``data`` as fresh Python objects (a datetime comes back as its RFC 3339 string).

    Raises:
        ValueError: ``data`` is not JSON (``orjson.JSONDecodeError`` is a ValueError).
    """
    return orjson.loads(data)
