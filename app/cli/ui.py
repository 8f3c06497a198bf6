"""``koord ui``: the service's ``/ui`` page in a browser, with the user's own credentials, as ``kubectl proxy`` serves
the API server.

The service answers no inspection call without credentials (:mod:`app.server.inspectauth`), and a browser sends
no bearer token (nor, usually, a client certificate). ``koord ui`` listens on 127.0.0.1 only and forwards the
page (``/ui``, ``/ui/static/...``) and the calls it makes (``/apis/v1/...``) to ``--server`` with the kubeconfig's
credentials (:func:`app.cli.remote.connection`: a token, an exec plugin's token, or a client certificate), so the
service's RBAC decides with the user's identity. Any other path answers 404. A request whose ``Host`` is not a
loopback name is refused 403, as ``kubectl proxy``'s default ``--accept-hosts`` refuses it (a web page that
rebinds its DNS name to 127.0.0.1 cannot use the proxy). Typical use, the extender being on its pod's loopback::

    kubectl -n koordinator-system port-forward deploy/koord-scheduler 9876 &
    koord ui --server https://127.0.0.1:9876 --certificate-authority ca.crt   # then open http://127.0.0.1:8001/ui
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator
from typing import Annotated

import httpx
import orjson
import typer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.cli.remote import (
    DEFAULT_SERVER,
    CAOpt,
    ClientCertOpt,
    ClientKeyOpt,
    ContextOpt,
    InsecureOpt,
    KubeconfigOpt,
    ServerOpt,
    connection,
)

#: ``Host`` names the proxy answers (kubectl proxy's default ``--accept-hosts``), with any port.
ACCEPTED_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})
#: The address the proxy listens on: loopback only, since it adds the user's credentials to what it forwards.
LISTEN_ADDRESS = "127.0.0.1"
#: Answer headers passed back to the browser.
PASSED_HEADERS = ("content-type", "location", "retry-after", "cache-control")


def forwarded(path: str) -> bool:
    """Whether the proxy forwards ``path``: the page and its files, and the inspection API it reads."""
    return path == "/ui" or path.startswith(("/ui/", "/apis/v1/"))


def host_name(host: str) -> str:
    """The name of a ``Host`` header without its port: ``127.0.0.1:8001`` -> ``127.0.0.1``, ``[::1]:8001`` ->
    ``[::1]``."""
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0]


def _message(text: str, code: int) -> Response:
    return Response(orjson.dumps({"message": text}), status_code=code, media_type="application/json")


def build_proxy(server: str, verify: bool | ssl.SSLContext, auth: httpx.Auth | None) -> Starlette:
    """The proxy's ASGI app: forwards ``GET``/``POST`` of :func:`forwarded` paths to ``server`` (``verify``, ``auth``:
    :func:`app.cli.remote.connection`) and passes the answer back; 403 for a foreign ``Host``, 404 for other
    paths, 502 ``{"message": ...}`` when ``server`` gave no answer."""
    upstream = httpx.AsyncClient(base_url=server.rstrip("/"), verify=verify, auth=auth, timeout=30.0)

    async def forward(request: Request) -> Response:
        host = request.headers.get("host", "")
        if host_name(host) not in ACCEPTED_HOSTS:
            return _message(f"host {host!r} is not accepted: open the page at http://127.0.0.1 or localhost", 403)
        path = request.url.path
        if not forwarded(path):
            return _message(f"koord ui forwards /ui and /apis/v1/... only, not {path}", 404)
        headers = {"content-type": request.headers["content-type"]} if "content-type" in request.headers else {}
        try:
            answer = await upstream.request(
                request.method, path, params=request.query_params, content=await request.body(), headers=headers
            )
        except httpx.HTTPError as exc:
            return _message(f"cannot reach {server}: {exc}", 502)
        passed = {k: v for k, v in answer.headers.items() if k in PASSED_HEADERS}
        return Response(answer.content, status_code=answer.status_code, headers=passed)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await upstream.aclose()

    return Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST"])], lifespan=lifespan)


def ui(
    server: ServerOpt = DEFAULT_SERVER,
    port: Annotated[int, typer.Option(help="Port to listen on, on 127.0.0.1 (as kubectl proxy's 8001).")] = 8001,
    insecure: InsecureOpt = False,
    certificate_authority: CAOpt = None,
    client_certificate: ClientCertOpt = None,
    client_key: ClientKeyOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Open the service's /ui page in a browser with your kubeconfig's credentials (a local proxy on 127.0.0.1, as
    kubectl proxy is for the API server)."""
    import uvicorn

    verify, auth = connection(
        server, insecure, certificate_authority, client_certificate, client_key, kubeconfig, context
    )
    typer.echo(f"Forwarding to {server}: open http://{LISTEN_ADDRESS}:{port}/ui (Ctrl-C stops)")
    uvicorn.run(build_proxy(server, verify, auth), host=LISTEN_ADDRESS, port=port, log_level="warning")
