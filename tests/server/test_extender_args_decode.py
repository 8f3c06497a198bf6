"""decode_extender_args (app/server/extender_routes.py) answers as the pydantic model's validation: the same
ExtenderArgs for every body, the same BadRequest message for every bad one (hypothesis over JSON bodies of the
nodeCacheCapable shape and near it: names that are not strings, a Nodes list, a Pod that is not an object)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.api.extender import ExtenderArgs
from app.server.extender_routes import decode_extender_args
from app.server.wire import BadRequest, decode

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False), st.text(max_size=5))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=8,
)
names = st.lists(st.one_of(st.text(max_size=8), json_values), max_size=6)
bodies = st.fixed_dictionaries(
    {},
    optional={
        "Pod": st.one_of(st.dictionaries(st.text(max_size=4), json_values, max_size=3), json_values),
        "Nodes": st.one_of(
            st.none(),
            st.fixed_dictionaries({"items": st.lists(st.dictionaries(st.text(max_size=3), scalars))}),
            json_values,
        ),
        "NodeNames": st.one_of(st.lists(st.text(max_size=8), max_size=6), names, json_values),
        "Other": json_values,
    },
)


def outcome(decoder: Any, body: bytes) -> Any:
    try:
        return decoder(body).model_dump()
    except BadRequest as exc:
        return ("BadRequest", str(exc))


@settings(max_examples=400, deadline=None)
@given(body=bodies)
def test_fast_decode_equals_model_validation(body: dict[str, Any]) -> None:
    raw = orjson.dumps(body)
    assert outcome(decode_extender_args, raw) == outcome(lambda b: decode(b, ExtenderArgs), raw)


@pytest.mark.parametrize("raw", [b"", b"[]", b"{bad", b'{"Pod": {}, "NodeNames": ["a", 1]}', b'{"Pod": 1}'])
def test_bad_bodies_get_the_model_messages(raw: bytes) -> None:
    assert outcome(decode_extender_args, raw) == outcome(lambda b: decode(b, ExtenderArgs), raw)
    assert outcome(decode_extender_args, raw)[0] == "BadRequest"
