"""POST /filter, /prioritize, /preempt, /bind: the kube-scheduler extender verbs over HTTP.

Bodies and answers follow k8s.io/kube-scheduler/extender/v1 (see :mod:`app.api.extender`).
Malformed bodies get HTTP 400 ``{"message": ...}`` and change nothing.

The verbs are FastAPI routes (the OpenAPI schema, client-certificate rules and tests see them
there), and :class:`VerbFastPath`, in front of FastAPI altogether (behind the client-certificate
check; :class:`app.server.app.ServiceApp`), answers the same requests with the same handlers without
FastAPI's middleware stack, routing, dependency solving and ``Request``/``Response`` objects: those
cost ~0.2 ms of CPU per call, a sixth of a pod's scheduling cost, on calls kube-scheduler makes three
times per pod (issue 13).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.extender import ExtenderBindingArgs, ExtenderPreemptionArgs
from app.cache.podinfo import PodError
from app.server.bodylimit import announced_over, too_large_body
from app.server.clientauth import ClientRule, client_refusal, rules_by_path
from app.server.state import ServiceState
from app.server.wire import BadRequest, decode, decode_extender_args

router = APIRouter(tags=["extender"])


#: A verb's handler: (service state, request body, the ASGI ``receive`` of the call) -> the answer (JSON-able).
Handler = Callable[[ServiceState, bytes, Receive], Awaitable[Any]]


#: A verb's handler that never waits: (service state, request body) -> the answer (JSON-able).
SyncHandler = Callable[[ServiceState, bytes], Any]


async def _answer(state: ServiceState, verb: str, handler: Handler, body: bytes, receive: Receive) -> tuple[int, bytes]:
    """Run ``handler``, time and count the call: (HTTP status, JSON body); BadRequest/PodError become 400."""
    start = time.perf_counter()
    try:
        code, content = 200, await handler(state, body, receive)
    except (BadRequest, PodError) as exc:
        code, content = 400, {"message": str(exc)}
    return _encoded(state, verb, start, code, content)


def answer_now(state: ServiceState, verb: str, handler: SyncHandler, body: bytes) -> tuple[int, bytes]:
    """:func:`_answer` for a handler that never waits, called without an event-loop step: (HTTP status, JSON
    body); BadRequest/PodError become 400, anything else raised propagates (a bug)."""
    start = time.perf_counter()
    try:
        code, content = 200, handler(state, body)
    except (BadRequest, PodError) as exc:
        code, content = 400, {"message": str(exc)}
    return _encoded(state, verb, start, code, content)


def _encoded(state: ServiceState, verb: str, start: float, code: int, content: Any) -> tuple[int, bytes]:
    data = orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)
    state.metrics.observe(verb, code, time.perf_counter() - start)
    return code, data


async def _serve(request: Request, verb: str, handler: Handler) -> Response:
    """Decode, answer, time and count one call routed by FastAPI; BadRequest/PodError become HTTP 400."""
    state: ServiceState = request.app.state.service
    body = await request.body()
    code, data = await _answer(state, verb, handler, body, request.receive)
    return Response(content=data, status_code=code, media_type="application/json")


def filter_now(state: ServiceState, body: bytes) -> Any:
    """The ``/filter`` answer to ``body`` (ExtenderArgs -> ExtenderFilterResult); a preemption the filter calls
    for is started as a task of the running loop.

    Raises:
        BadRequest, PodError: ``body`` is not a valid ExtenderArgs (answered 400).
    """
    args = decode_extender_args(body, state.extender.name_lists)
    result, preemption = state.extender.filter_and_preempt(args, fragments=True)
    if preemption is not None:
        state.extender.start_preemption(preemption)
    return result


def prioritize_now(state: ServiceState, body: bytes) -> Any:
    """The ``/prioritize`` answer to ``body`` (ExtenderArgs -> HostPriorityList, scores 0..10).

    Raises:
        BadRequest, PodError: ``body`` is not a valid ExtenderArgs (answered 400).
    """
    return state.extender.prioritize_answer(decode_extender_args(body, state.extender.name_lists))


async def _filter(state: ServiceState, body: bytes, receive: Receive) -> Any:
    return filter_now(state, body)


async def _prioritize(state: ServiceState, body: bytes, receive: Receive) -> Any:
    return prioritize_now(state, body)


async def _preempt(state: ServiceState, body: bytes, receive: Receive) -> Any:
    return state.extender.preempt(decode(body, ExtenderPreemptionArgs))


async def _bind(state: ServiceState, body: bytes, receive: Receive) -> Any:
    async def caller_gone() -> None:
        """Completes once the client disconnected. The body is read, so the ASGI server's next message is
        the disconnect; a server that answers an empty request message instead is asked again each second."""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            if not message.get("more_body"):
                await asyncio.sleep(1.0)

    return await state.extender.bind(decode(body, ExtenderBindingArgs), caller_gone)


#: Path -> (verb name in the metrics, handler).
VERBS: dict[str, tuple[str, Handler]] = {
    "/filter": ("filter", _filter),
    "/prioritize": ("prioritize", _prioritize),
    "/preempt": ("preempt", _preempt),
    "/bind": ("bind", _bind),
}


class InlineVerbs:
    """The verbs the HTTP protocol answers with no ASGI request cycle: ``POST /filter`` and ``POST /prioritize``,
    whose handlers never wait (:func:`filter_now`, :func:`prioritize_now`), inside its parser callback; and
    ``POST /bind``, from a task the callback starts (:meth:`answer_later`).

    kube-scheduler makes both calls inside its serial scheduling cycle, so their latency is paid once per pod, and
    uvicorn's ASGI cycle (a scope, a task, receive and send messages) costs ~0.1 ms of CPU per call before any
    handler runs (``bench/cycle.py``'s ``http_floor``, issue 47). :class:`app.server.httpprotocol.ServiceProtocol`
    uses this object, found as ``inline_verbs`` on the app it serves, to answer those two verbs in the same
    event-loop step as the request's last bytes: same handlers, answers, metrics, body limit and client-certificate
    rules as :class:`VerbFastPath` behind :class:`~app.server.clientauth.ClientAuthMiddleware`.

    Args:
        state: the service state the handlers use.
        max_body_size: the request body limit in bytes (a larger body is answered 413).
        rules: the client-certificate rules (None: no client certificate is asked).
    """

    #: Raw request target -> (verb name in the metrics, path, handler).
    HANDLERS: dict[bytes, tuple[str, str, SyncHandler]] = {
        b"/filter": ("filter", "/filter", filter_now),
        b"/prioritize": ("prioritize", "/prioritize", prioritize_now),
    }
    #: Raw request target -> (verb name in the metrics, path, handler) of the verbs answered from a task of their
    #: own, started in the parser's callback: ``POST /bind`` (its binding cycle awaits the Binding's POST).
    LATER: dict[bytes, tuple[str, str, Handler]] = {b"/bind": ("bind", "/bind", _bind)}
    #: Every raw target answered inline -> its path.
    PATHS: dict[bytes, str] = {t: v[1] for t, v in (*HANDLERS.items(), *LATER.items())}

    def __init__(self, state: ServiceState, max_body_size: int, rules: Iterable[ClientRule] | None = None) -> None:
        self.state = state
        self.max_body_size = max_body_size
        self._rules = rules_by_path(rules or ())

    def refusal(self, target: bytes, tls: dict[str, Any] | None) -> tuple[int, bytes] | None:
        """(401 or 403, JSON ``{"message"}``) when the connection's client certificate (``tls``: the ASGI TLS
        extension, None without TLS) may not call the verb ``target`` names; None when it may."""
        rule = self._rules.get(self.PATHS[target])
        refusal = client_refusal(rule, tls) if rule is not None else None
        if refusal is None:
            return None
        return refusal[1], orjson.dumps({"message": refusal[0]})

    def too_large(self) -> tuple[int, bytes]:
        """The 413 answer to a body over the limit (as :class:`VerbFastPath` gives it)."""
        return 413, too_large_body(self.max_body_size)

    def answer(self, target: bytes, body: bytes) -> tuple[int, bytes]:
        """(HTTP status, JSON body) of the verb ``target`` names (a key of :data:`HANDLERS`), timed and counted.

        Raises:
            Exception: whatever the handler raises other than a bad request (a bug; answered 500).
        """
        verb, _, handler = self.HANDLERS[target]
        return answer_now(self.state, verb, handler, body)

    async def answer_later(self, target: bytes, body: bytes, receive: Receive) -> tuple[int, bytes]:
        """(HTTP status, JSON body) of the verb ``target`` names (a key of :data:`LATER`), timed and counted as on
        the ASGI path; ``receive`` gives ``{"type": "http.disconnect"}`` once the caller is gone (a bind waiting
        at Permit is then rejected).

        Raises:
            Exception: whatever the handler raises other than a bad request (a bug; answered 500).
        """
        verb, _, handler = self.LATER[target]
        return await _answer(self.state, verb, handler, body, receive)

    def after(self, target: bytes) -> None:
        """Work done once the answer to the verb ``target`` names is written: after ``/filter``, the ``/prioritize``
        answer that kube-scheduler asks for next is worked out ahead
        (:meth:`~app.server.extender.ExtenderService.score_ahead`), while kube-scheduler runs its own scoring."""
        if target == b"/filter":
            self.state.extender.score_ahead()


class VerbFastPath:
    """ASGI middleware answering ``POST`` of the extender verbs (:data:`VERBS`) directly.

    Same handlers, answers, metrics and body limit as the routes (an announced or streamed body over
    ``max_body_size`` bytes gets the JSON 413 of :mod:`app.server.bodylimit`); anything else goes on
    to ``app``. Install it behind :class:`~app.server.clientauth.ClientAuthMiddleware` so callers
    are checked first. An exception a handler raises (a bug: bad input is answered 400) propagates
    to the ASGI server, which logs it and answers a plain 500, as Starlette's server-error
    middleware does for the routes.

    Args:
        app: the rest of the application.
        state: the service state the handlers use.
        max_body_size: the request body limit in bytes.
    """

    def __init__(self, app: ASGIApp, state: ServiceState, max_body_size: int) -> None:
        self.app = app
        self.state = state
        self.max_body_size = max_body_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a verb call, or pass the request on."""
        verb = VERBS.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if verb is None:
            await self.app(scope, receive, send)
            return
        body = await self._body(scope, receive)
        if body is None:
            code, data = 413, too_large_body(self.max_body_size)
        else:
            code, data = await _answer(self.state, verb[0], verb[1], body, receive)
        await send(
            {
                "type": "http.response.start",
                "status": code,
                "headers": [(b"content-length", str(len(data)).encode()), (b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": data})

    async def _body(self, scope: Scope, receive: Receive) -> bytes | None:
        """The whole request body, or None once it is (announced or read) over the limit."""
        if announced_over(scope["headers"], self.max_body_size):
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message: Message = await receive()
            if message["type"] != "http.request":  # the caller left: answering is moot, the server drops it
                return b"".join(chunks)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_size:
                return None
            chunks.append(chunk)
            if not message.get("more_body"):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)


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
