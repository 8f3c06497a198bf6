"""POST /filter, /prioritize, /preempt, /bind: the kube-scheduler extender verbs over HTTP.

Bodies and answers follow k8s.io/kube-scheduler/extender/v1 (see :mod:`app.api.extender`).
Malformed bodies get HTTP 400 ``{"message": ...}`` and change nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request, Response

from app.api.extender import ExtenderArgs, ExtenderBindingArgs, ExtenderPreemptionArgs
from app.cache.podinfo import PodError
from app.server.state import ServiceState
from app.server.wire import BadRequest, decode, error_response, json_response

router = APIRouter(tags=["extender"])


async def _serve(
    request: Request, verb: str, handler: Callable[[ServiceState, bytes, Request], Awaitable[Any]]
) -> Response:
    """Decode, answer, time and count one call; BadRequest/PodError become HTTP 400."""
    start = time.perf_counter()
    state: ServiceState = request.app.state.service
    body = await request.body()
    try:
        response = json_response(await handler(state, body, request))
    except (BadRequest, PodError) as exc:
        response = error_response(str(exc), 400)
    state.metrics.observe(verb, response.status_code, time.perf_counter() - start)
    return response


async def _filter(state: ServiceState, body: bytes, request: Request) -> Any:
    args = decode(body, ExtenderArgs)
    result, preemption = state.extender.filter_and_preempt(args)
    if preemption is not None:
        state.extender.start_preemption(preemption)
    return result


async def _prioritize(state: ServiceState, body: bytes, request: Request) -> Any:
    return state.extender.prioritize(decode(body, ExtenderArgs))


async def _preempt(state: ServiceState, body: bytes, request: Request) -> Any:
    return state.extender.preempt(decode(body, ExtenderPreemptionArgs))


async def _bind(state: ServiceState, body: bytes, request: Request) -> Any:
    async def caller_gone() -> None:
        """Completes once the client disconnected. The body is read, so the ASGI server's next message is
        the disconnect; a server that answers an empty request message instead is polled each second."""
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                return
            if not message.get("more_body"):
                while not await request.is_disconnected():
                    await asyncio.sleep(1.0)
                return

    return await state.extender.bind(decode(body, ExtenderBindingArgs), caller_gone)


@router.post("/filter")
async def filter_verb(request: Request) -> Response:
    """ExtenderArgs -> ExtenderFilterResult."""
    return await _serve(request, "filter", _filter)


@router.post("/prioritize")
async def prioritize_verb(request: Request) -> Response:
    """ExtenderArgs -> HostPriorityList (scores 0..10)."""
    return await _serve(request, "prioritize", _prioritize)


@router.post("/preempt")
async def preempt_verb(request: Request) -> Response:
    """ExtenderPreemptionArgs -> ExtenderPreemptionResult."""
    return await _serve(request, "preempt", _preempt)


@router.post("/bind")
async def bind_verb(request: Request) -> Response:
    """ExtenderBindingArgs -> ExtenderBindingResult."""
    return await _serve(request, "bind", _bind)
