"""The no-op extender: the floor ``bench/cycle.py`` measures the service against, in the same run.

What it is
    The cheapest extender kube-scheduler can call, served by the service's own HTTP stack: the same
    process type (uvicorn, one worker, httptools, uvloop: :func:`bench.cycle.serve_asgi`), the same
    application class (:class:`app.server.app.ServiceApp`, whose verbs skip FastAPI's middleware
    stack) and the same verb front (:class:`app.server.extender_routes.VerbFastPath`'s body reading
    and answer writing), but a route set that does nothing of ours:

    - ``POST /filter``: decodes the whole body (orjson), keeps every node (``NodeNames`` as sent, or
      the names of ``Nodes.items``), ``FailedNodes`` empty;
    - ``POST /prioritize``: decodes the whole body, scores every node 0;
    - ``POST /bind``: decodes the whole body and POSTs the ``Binding`` through the service's own API
      client (:class:`app.client.aio.AsyncClient`, its aiohttp lane) to the API server of the
      kubeconfig; ``Error`` carries a refusal's message;
    - ``GET /readyz``: 200 once the client exists.

    It is the Python counterpart of the compiled no-op extender issue 29 measured on a real control
    plane (Go, standard library: decodes every body in full, keeps every node, scores 0, posts the
    Binding): the part of a pod's cost no code of ours can remove with this HTTP stack.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import Response
from starlette.types import Receive, Scope, Send

from app.client.aio import AsyncClient
from app.client.errors import ApiError
from app.server.app import ServiceApp
from app.server.extender_routes import VerbFastPath

#: Request body limit of the no-op's verbs (bytes), the service's default.
MAX_BODY = 64 << 20


def node_names(args: dict[str, Any]) -> list[str]:
    """The candidate names of decoded ExtenderArgs: ``NodeNames`` (nodeCacheCapable), else the names of
    ``Nodes.items``; ``[]`` when neither is sent."""
    names = args.get("NodeNames")
    if names is not None:
        return list(names)
    items = (args.get("Nodes") or {}).get("items") or []
    return [item["metadata"]["name"] for item in items]


class NoopVerbs(VerbFastPath):
    """The verb front of the no-op: :class:`VerbFastPath`'s body reading and answer writing around
    handlers that decode the body in full and do nothing else (``/bind`` POSTs the Binding).

    Args:
        app: the rest of the application (``/readyz``).
        client: the API client the Bindings go through (set by the app's lifespan before serving).
    """

    def __init__(self, app: Any) -> None:
        super().__init__(app, state=None, max_body_size=MAX_BODY)  # type: ignore[arg-type]
        self.client: AsyncClient | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer ``POST /filter``, ``/prioritize`` or ``/bind``; anything else goes on to the app."""
        path = scope["path"] if scope["type"] == "http" and scope["method"] == "POST" else None
        if path not in ("/filter", "/prioritize", "/bind"):
            await self.app(scope, receive, send)
            return
        body = await self._body(scope, receive)
        if body is None:
            code, data = 413, b'{"message":"request body too large"}'
        else:
            code, data = 200, orjson.dumps(await self.answer(path, orjson.loads(body)))
        await send(
            {
                "type": "http.response.start",
                "status": code,
                "headers": [(b"content-length", str(len(data)).encode()), (b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": data})

    async def answer(self, path: str, args: dict[str, Any]) -> Any:
        """The no-op's answer to a decoded verb body (see the module docstring)."""
        if path == "/filter":
            return {"Nodes": None, "NodeNames": node_names(args), "FailedNodes": {}, "Error": ""}
        if path == "/prioritize":
            return [{"Host": name, "Score": 0} for name in node_names(args)]
        assert self.client is not None, "the lifespan sets the client before serving"
        try:
            await self.client.bind(args["PodNamespace"], args["PodName"], args["PodUID"], args["Node"])
        except ApiError as exc:
            return {"Error": str(exc)}
        return {"Error": ""}


def create_noop_app(kubeconfig: str) -> ServiceApp:
    """The no-op extender as an ASGI app: its API client reads ``kubeconfig`` when the lifespan starts."""
    front: NoopVerbs

    @asynccontextmanager
    async def lifespan(_: ServiceApp) -> AsyncIterator[None]:
        front.client = AsyncClient.from_config(kubeconfig)
        try:
            yield
        finally:
            await front.client.aclose()

    app = ServiceApp(lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)

    @app.get("/readyz")
    async def readyz() -> Response:
        return Response(b"ok", media_type="text/plain")

    front = NoopVerbs(app.stack_call)
    app.verb_front = front
    return app
