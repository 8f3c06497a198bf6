"""LoopSupervisor on its own: restart after a failure with growing, capped backoff; a loop that returns counts as a
failure unless it runs once; cancelling forgets the loop.

The HTTP view is in tests/server/test_loop_supervision_http.py."""

from __future__ import annotations

import asyncio

import pytest

from app.sources.loops import LoopSupervisor


async def _until(cond: object, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():  # type: ignore[operator]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.005)


def test_delay_doubles_up_to_the_cap_with_at_most_a_quarter_of_jitter() -> None:
    sup = LoopSupervisor(backoff_initial=0.5, backoff_max=30.0)
    for failures, base in [(1, 0.5), (2, 1.0), (3, 2.0), (6, 16.0), (7, 30.0), (100, 30.0)]:
        for _ in range(20):
            assert base <= sup.delay(failures) <= min(30.0, base * 1.25)


async def test_a_failing_loop_restarts_and_keeps_running() -> None:
    sup = LoopSupervisor(backoff_initial=0.01, backoff_max=0.02)
    runs: list[int] = []

    async def work() -> None:
        runs.append(len(runs))
        if len(runs) < 3:
            raise ValueError(f"bad round {len(runs)}")
        await asyncio.Event().wait()

    task = sup.spawn("work", work)
    assert sup.loops["work"].running  # ready as soon as spawned
    await _until(lambda: len(runs) == 3)
    await asyncio.sleep(0)
    assert sup.errors["work"] == 2 and sup.loops["work"].restarts == 2
    assert sup.loops["work"].last_error == "ValueError: bad round 2"
    assert sup.not_running() == {}
    await sup.cancel([task])
    assert "work" not in sup.loops and sup.errors["work"] == 2


async def test_a_loop_that_returns_is_a_failure_unless_it_runs_once() -> None:
    sup = LoopSupervisor(backoff_initial=5.0)

    async def quits() -> None:
        return None

    forever = sup.spawn("forever", quits)
    once = sup.spawn("once", quits, once=True)
    await _until(lambda: sup.errors["forever"] == 1 and once.done())
    assert sup.not_running() == {"forever": "returned, but it must run until stopped"}
    assert "once" not in sup.loops and sup.errors["once"] == 0
    await sup.cancel([forever])
    assert sup.not_running() == {}


async def test_a_task_group_failure_is_named_by_its_member() -> None:
    sup = LoopSupervisor(backoff_initial=5.0)

    async def group() -> None:
        async def bad() -> None:
            raise KeyError("quota")

        async with asyncio.TaskGroup() as tg:
            tg.create_task(bad())

    task = sup.spawn("group", group)
    await _until(lambda: sup.errors["group"] == 1)
    assert sup.not_running() == {"group": "KeyError: 'quota'"}
    await sup.cancel([task])


async def test_a_name_is_supervised_once() -> None:
    sup = LoopSupervisor()
    task = sup.spawn("x", asyncio.Event().wait)
    with pytest.raises(ValueError, match="already supervised"):
        sup.spawn("x", asyncio.Event().wait)
    await sup.cancel([task])
    sup.spawn("x", asyncio.Event().wait).cancel()  # the name is free again once cancelled
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert "x" not in sup.loops
