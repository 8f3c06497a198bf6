"""The gang model's parsing of annotation values, as Go parses them (``strconv.ParseInt(s, 10, 32)``,
``json.Unmarshal`` into ``[]string``), and the PodGroup fields a gang reads."""

from __future__ import annotations

import pytest

from app.plugins.coscheduling.gang import parse_groups, parse_int32, parse_pod_group


@pytest.mark.parametrize(("text", "value"), [("3", 3), ("+3", 3), ("-1", -1), ("007", 7), ("2147483647", 2**31 - 1)])
def test_parse_int32_accepts_what_go_accepts(text: str, value: int) -> None:
    assert parse_int32(text) == value


@pytest.mark.parametrize("text", ["", " 3", "3 ", "3_0", "3.0", "0x3", "two", "2147483648", "-2147483649"])
def test_parse_int32_refuses_what_go_refuses(text: str) -> None:
    with pytest.raises(ValueError, match=r"strconv\.ParseInt"):
        parse_int32(text)


def test_parse_groups() -> None:
    assert parse_groups("") == []
    assert parse_groups('["default/a","default/b"]') == ["default/a", "default/b"]
    for bad in ("default/a", '{"a": 1}', "[1, 2]", '["a"'):
        with pytest.raises(ValueError):
            parse_groups(bad)


def test_parse_pod_group_reads_the_gang_fields_and_refuses_mistyped_ones() -> None:
    obj = {
        "metadata": {"name": "g", "annotations": {"a": "b"}, "creationTimestamp": "2026-11-22T09:00:00Z"},
        "spec": {"minMember": 3, "scheduleTimeoutSeconds": 30},
    }
    spec = parse_pod_group(obj)
    assert (spec.min_member, spec.schedule_timeout_seconds, spec.annotations) == (3, 30, {"a": "b"})
    assert spec.created is not None
    assert parse_pod_group({"metadata": {"name": "g"}}).min_member == 0
    for bad in ({"minMember": "3"}, {"minMember": 2**31}, {"minMember": True}, {"scheduleTimeoutSeconds": "30"}):
        with pytest.raises(ValueError):
            parse_pod_group({"metadata": {"name": "g"}, "spec": bad})
