"""One call in flight per key: concurrent callers share its answer or its failure, and nothing is kept after it."""

from __future__ import annotations

import asyncio

import pytest

from app.server.singleflight import SingleFlight


async def test_concurrent_callers_share_one_call() -> None:
    flights: SingleFlight[int] = SingleFlight()
    calls = 0
    gate = asyncio.Event()

    async def ask() -> int:
        nonlocal calls
        calls += 1
        await gate.wait()
        return 42

    waiting = [asyncio.create_task(flights.do("k", ask)) for _ in range(5)]
    other = asyncio.create_task(flights.do("other", ask))
    await asyncio.sleep(0)
    assert len(flights) == 2
    gate.set()
    assert await asyncio.gather(*waiting, other) == [42] * 6
    assert calls == 2
    assert len(flights) == 0
    assert await flights.do("k", ask) == 42 and calls == 3  # nothing kept: a later call asks again


async def test_a_failure_reaches_every_waiter_and_is_not_kept() -> None:
    flights: SingleFlight[int] = SingleFlight()
    gate = asyncio.Event()

    async def fail() -> int:
        await gate.wait()
        raise ConnectionError("down")

    waiting = [asyncio.create_task(flights.do("k", fail)) for _ in range(3)]
    await asyncio.sleep(0)
    gate.set()
    results = await asyncio.gather(*waiting, return_exceptions=True)
    assert [type(r) for r in results] == [ConnectionError] * 3

    async def ok() -> int:
        return 1

    assert await flights.do("k", ok) == 1


async def test_a_cancelled_call_cancels_its_waiters_and_frees_the_key() -> None:
    flights: SingleFlight[int] = SingleFlight()

    async def slow() -> int:
        await asyncio.sleep(10)
        return 1

    leader = asyncio.create_task(flights.do("k", slow))
    await asyncio.sleep(0)
    follower = asyncio.create_task(flights.do("k", slow))
    await asyncio.sleep(0)
    leader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await follower
    assert len(flights) == 0
