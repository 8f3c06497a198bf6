"""encode_json / encode_object try orjson's default path first (issue 29: OPT_NON_STR_KEYS is orjson's slow
path) and must write exactly the bytes the full options write, for every value: what a watch decodes
(string keys only) and what a YAML file loads (datetimes, dates, times, integer, float, boolean and null keys)."""

from __future__ import annotations

import datetime as dt
import enum

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.api import jsonbytes
from app.api.jsonbytes import encode_json, encode_object


class Color(enum.Enum):
    RED = "red"


class Key(str):
    """A str subclass: orjson's default path refuses it as a key."""


_FULL = orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS

_TZ = st.sampled_from([None, dt.UTC, dt.timezone(dt.timedelta(hours=2)), dt.timezone(-dt.timedelta(hours=5))])
_DATETIMES = st.builds(lambda d, tz: d.replace(tzinfo=tz), st.datetimes(min_value=dt.datetime(1970, 1, 1)), _TZ)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    _DATETIMES,
    st.dates(),
    st.times(),
    st.just(Color.RED),
)
_KEYS = st.one_of(
    st.text(max_size=6),
    st.integers(min_value=-1000, max_value=1000),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    _DATETIMES,
    st.text(max_size=4).map(Key),
)
_STR_KEYS = st.text(max_size=6)


def _values(keys: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.recursive(
        _SCALARS,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
        max_leaves=20,
    )


def _full(value: object) -> bytes | None:
    try:
        return orjson.dumps(value, option=_FULL)
    except orjson.JSONEncodeError:
        return None


@settings(max_examples=400, deadline=None)
@given(_values(_KEYS))
def test_encode_json_writes_exactly_what_the_full_options_write(value: object) -> None:
    expected = _full(value)
    if expected is None:
        with pytest.raises(orjson.JSONEncodeError):
            encode_json(value)
        with pytest.raises(TypeError, match="not JSON-shaped"):
            encode_object(value)
    else:
        assert encode_json(value) == expected
        assert encode_object(value) == expected


@settings(max_examples=200, deadline=None)
@given(_values(_STR_KEYS))
def test_decoded_json_takes_the_fast_path_unchanged(value: object) -> None:
    """What a watch brings (JSON decoded: string keys, no datetimes) round-trips byte for byte."""
    data = orjson.dumps(value, option=_FULL)
    decoded = orjson.loads(data)
    assert encode_object(decoded) == orjson.dumps(decoded, option=_FULL)


def test_values_the_options_change_are_written_as_the_options_write_them() -> None:
    """The cases the fast path must refuse, written out: a naive datetime (UTC, ``Z``), an aware one in UTC
    (``Z``, not ``+00:00``), non-string keys, a str subclass key."""
    value = {
        "naive": dt.datetime(2026, 11, 28, 12, 0, 0),
        "utc": dt.datetime(2026, 11, 28, 12, 0, 0, tzinfo=dt.UTC),
        "day": dt.date(2026, 11, 28),
        1: "one",
        None: "null",
        Key("k"): "sub",
    }
    assert encode_object(value) == (
        b'{"naive":"2026-11-28T12:00:00Z","utc":"2026-11-28T12:00:00Z","day":"2026-11-28",'
        b'"1":"one","null":"null","k":"sub"}'
    )


def test_the_fast_path_is_taken_for_json_shaped_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shortcut itself: an object of plain JSON values is written by one call without the slow options."""
    calls: list[int] = []
    real = orjson.dumps

    def counting(value: object, option: int = 0, **kw: object) -> bytes:
        calls.append(option)
        return real(value, option=option, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(jsonbytes.orjson, "dumps", counting)
    encode_object({"metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"containers": [{"name": "c"}]}})
    assert calls == [jsonbytes._FAST_OPTIONS]
    assert not calls[0] & orjson.OPT_NON_STR_KEYS
