"""The typed admission shapes and the field.Error rendering of their errors (no HTTP: the wording itself)."""

from __future__ import annotations

import pytest

from tests.conftest import wire
from tests.plugins.elasticquota.fixtures import quota
from tests.plugins.reservation.fixtures import reservation
from webhooks.fielderrors import MAX_VALUE_CHARS, invalid, render_value
from webhooks.shapes import ElasticQuota, Pod, Reservation, describe, object_errors


@pytest.mark.parametrize(
    ("value", "rendered"),
    [
        ("x", '"x"'),
        ('a"b\\c', '"a\\"b\\\\c"'),
        ("nul\x00tab\tnl\n", '"nul\\x00tab\\tnl\\n"'),
        ("é漢字", '"é漢字"'),  # printable Unicode is kept, as Go's %q keeps it
        ("\u200b", '"\\u200b"'),  # unprintable: escaped
        (None, "null"),
        (True, "true"),
        (5, "5"),
        (2**70, "1180591620717411303424"),
        (1.5, "1.5"),
        ([], "[]"),
        ({"a": [1, None]}, '{"a":[1,null]}'),
    ],
)
def test_values_render_as_field_error_prints_them(value: object, rendered: str) -> None:
    assert render_value(value) == rendered
    assert str(invalid("f", value, "d")) == f"f: Invalid value: {rendered}: d"


def test_long_values_are_cut() -> None:
    assert render_value("x" * 10_000) == '"' + "x" * MAX_VALUE_CHARS + '"...'
    assert render_value(list(range(10_000))).endswith("...")
    assert len(render_value(list(range(10_000)))) == MAX_VALUE_CHARS + 3


def test_real_objects_fit_their_shapes() -> None:
    assert object_errors(Pod, wire("admissionreview.json")["request"]["object"]) == []
    assert object_errors(Pod, wire("filter.json")["Pod"]) == []
    for node in wire("filter.nodecache-false.json")["Nodes"]["items"]:
        assert object_errors(Pod, {"metadata": node["metadata"]}) == []
    assert object_errors(ElasticQuota, quota("q", {"cpu": "1"}, {"cpu": "2"}, parent="p", namespaces=["a"])) == []
    assert object_errors(Reservation, reservation("r", ttl="1h")) == []


def test_paths_name_fields_map_keys_and_list_items() -> None:
    errs = object_errors(Pod, {"spec": {"containers": [{}, {"resources": {"requests": {"cpu": None, "x/y": {}}}}]}})
    assert [str(e) for e in errs] == [
        "spec.containers[1].resources.requests[x/y]: Invalid value: {}: must be a quantity (a string or a number)"
    ]
    assert [str(e) for e in object_errors(Pod, [1], "oldObject")] == [
        "oldObject: Invalid value: [1]: must be an object"
    ]
    assert [str(e) for e in object_errors(Pod, "x")] == ['object: Invalid value: "x": must be an object']


def test_describe_caps_the_list() -> None:
    errs = [invalid(f"f{i}", i, "bad") for i in range(25)]
    assert describe(errs[:1]) == "f0: Invalid value: 0: bad"
    assert describe(errs).endswith("f19: Invalid value: 19: bad] (and 5 more errors)")
