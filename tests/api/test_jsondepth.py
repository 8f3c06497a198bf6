"""The depth limit at decoding (issue 46): measured iteratively, named in the error, skipped for shallow text."""

from __future__ import annotations

from typing import Any

import pytest

from app.api.jsondepth import TooDeep, check_body_depth, check_depth, may_exceed


def _nested(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


@pytest.mark.parametrize(
    ("depth", "limit", "too_deep"),
    [(0, 3, False), (3, 3, False), (4, 3, True), (100_000, 100, True)],
    ids=["scalar", "at-limit", "one-over", "100k-no-recursion"],
)
def test_check_depth(depth: int, limit: int, too_deep: bool) -> None:
    value = _nested(depth)
    if too_deep:
        with pytest.raises(TooDeep, match=f"more than {limit} levels"):
            check_depth(value, limit)
    else:
        check_depth(value, limit)


def test_shallow_text_is_not_walked() -> None:
    assert not may_exceed(b'{"a": [1, 2]}', 2)
    assert may_exceed(b'{"a": [{}]}', 2)
    check_body_depth(b"{}", _nested(50), 3)  # the text says it cannot be deep: not walked
    with pytest.raises(TooDeep):
        check_body_depth(b"[[[[", _nested(4), 3)
