"""FileSource.create_or_update copies the caller's object with ``_copy_tree`` instead of ``copy.deepcopy``:
the copy must equal deepcopy's and share no mutable container with the original (the stored object never
aliases the caller's), JSON trees drawn by hypothesis and values outside JSON (deepcopy'd) alike."""

from __future__ import annotations

import copy
from collections import OrderedDict
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.sources.files import FileSource, _copy_tree
from tests.sources.test_files import Sink

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=30,
)


def _containers(value: Any, out: list[Any]) -> list[Any]:
    """Every mutable container reachable from ``value`` (dicts, lists, sets; through tuples too)."""
    if isinstance(value, dict):
        out.append(value)
        for item in value.values():
            _containers(item, out)
    elif isinstance(value, (list, set)):
        out.append(value)
        for item in value:
            _containers(item, out)
    elif isinstance(value, tuple):
        for item in value:
            _containers(item, out)
    return out


def _shares_nothing(original: Any, copied: Any) -> bool:
    ids = {id(c) for c in _containers(original, [])}
    return not any(id(c) in ids for c in _containers(copied, []))


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_copy_tree_equals_deepcopy_and_shares_no_container(value: Any) -> None:
    copied = _copy_tree(value)
    assert copied == copy.deepcopy(value)
    assert _shares_nothing(value, copied)


def test_values_outside_json_are_deep_copied() -> None:
    inner = [1, {"a": [2]}]
    value = {"t": (inner, "x"), "s": {1, 2}, "o": OrderedDict(k=[3]), "l": [(inner,)]}
    copied = _copy_tree(value)
    assert copied == copy.deepcopy(value)
    assert type(copied["o"]) is OrderedDict
    assert _shares_nothing(value, copied)


async def test_stored_object_does_not_alias_the_callers(tmp_path: Path) -> None:
    src = FileSource(tmp_path, poll_interval=0, restamp_interval=0)
    await src.start(Sink())
    try:
        pod = {
            "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        }
        created = await src.create_or_update(pod)
        pod["metadata"]["labels"]["a"] = "changed"
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "9"
        pod["spec"]["containers"].append({"name": "d"})
        assert created["metadata"]["labels"] == {"a": "b"}
        assert created["spec"]["containers"] == [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
        assert "namespace" not in pod["metadata"] and "uid" not in pod["metadata"]  # the caller's is untouched
    finally:
        await src.stop()
