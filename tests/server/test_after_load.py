"""After the first full load the service freezes the GC generations, raises the young generation's
threshold (fewer pointless collections per scheduled pod)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from app.server.app import GC_YOUNG_THRESHOLD, freeze_after_load
from app.sources.base import Source
from app.sources.events import EventSink


class Loaded(Source):
    def __init__(self) -> None:
        self.polls = 0

    async def start(self, sink: EventSink) -> None:
        pass

    async def stop(self) -> None:
        pass

    def ready(self) -> bool:
        self.polls += 1
        return self.polls > 2  # ready on the third look: the task waits for it

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        pass

    @property
    def description(self) -> str:
        return "loaded"


@pytest.fixture
def restore_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.set_threshold(*threshold)
    gc.unfreeze()


async def test_the_young_threshold_is_raised_only_once_the_load_is_in(restore_gc: None) -> None:
    _, older, oldest = gc.get_threshold()
    source = Loaded()
    await freeze_after_load(source)
    assert source.polls == 3
    assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, older, oldest)
    assert gc.get_freeze_count() > 0
