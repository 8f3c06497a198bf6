"""Fixtures of the agent tests: a real cgroup subtree (skipped with a reason where cgroups are not writable)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.agent.cgtree import CgroupTree, writable_reason


@pytest.fixture
def cgtree() -> Iterator[CgroupTree]:
    """A unique kubepods-test-<id> subtree; processes are killed and dirs removed even when the test fails."""
    reason = writable_reason()
    if reason is not None:
        pytest.skip(reason)
    tree = CgroupTree()
    try:
        yield tree
    finally:
        tree.cleanup()
