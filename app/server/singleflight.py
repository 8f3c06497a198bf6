"""One call in flight per key: concurrent callers asking the same thing share one answer.

Go's ``golang.org/x/sync/singleflight``, which k8s.io/apiserver's cached token authenticator uses so that a burst
of requests with one new token sends one TokenReview. Here the page's first load (the page, its script, three
JSON calls at once, all with the same token) asks the API server once per question instead of five times. A
failure reaches every caller waiting on it and is not kept: the next call after it asks again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    """Runs ``fn()`` once per key while a call for that key is in flight; later callers await the same result."""

    def __init__(self) -> None:
        self._calls: dict[Hashable, asyncio.Future[T]] = {}

    def __len__(self) -> int:
        """Calls in flight now."""
        return len(self._calls)

    async def do(self, key: Hashable, fn: Callable[[], Awaitable[T]]) -> T:
        """``await fn()``, or the result of the call for ``key`` already in flight.

        Raises:
            Exception: whatever ``fn`` raised, to every caller that waited on that call.
        """
        waiting = self._calls.get(key)
        if waiting is not None:
            return await asyncio.shield(waiting)
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._calls[key] = future
        try:
            result = await fn()
        except asyncio.CancelledError:
            future.cancel()  # the waiters are cancelled too; the next call asks again
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "exception was never retrieved" when nobody else waited
            raise
        else:
            future.set_result(result)
            return result
        finally:
            del self._calls[key]
