"""Asking a running service: the ``--server``, ``--certificate-authority`` and ``--insecure`` options of
``koord quota | gang | reservation | explain | snapshot --server`` (and every later client command that uses
them; ``--client-certificate`` / ``--client-key`` for a certificate of the service's ``--client-ca-file``) and
one GET / POST helper with their exit codes.

**Credentials.** The service lets a caller read the cluster's state only as far as the caller's RBAC allows
(:mod:`app.server.inspectauth`), so each request carries the user's kubeconfig credentials, as ``kubectl``
sends them to the API server: ``--kubeconfig`` / ``--context``, else the kubeconfig ``kubectl`` finds
(``$KUBECONFIG``, ``~/.kube/config``, in a pod its ServiceAccount). The ``kubernetes`` package's loader resolves
them (:func:`app.client.config.load_configuration`): a bearer token, an ``exec`` plugin's token (run again when
it expires), or a client certificate (presented unless ``--client-certificate`` is given). They are sent only
over HTTPS or to a loopback address (a ``kubectl port-forward``), never in clear text over the network; with
no kubeconfig found and none named, nothing is sent (an embedded service needs none).

The service's address is ``--server URL``, else ``$KOORD_SERVER``, else :data:`DEFAULT_SERVER`
(``make run PORT=9999`` pairs with ``export KOORD_SERVER=http://127.0.0.1:9999``).

Exit codes: 1 the service answered 404 (the object does not exist), 2 anything else that kept the
command from an answer (unreachable, TLS failure, an address that answers but is not a koord service,
another error status).
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path
from typing import Annotated, Any, NoReturn

import httpx
import orjson
import typer
from rich.console import Console
from rich.markup import escape

err_console = Console(stderr=True)

DEFAULT_SERVER = "http://127.0.0.1:9876"
#: The environment variable a client command reads its server from when ``--server`` is not given.
SERVER_ENV = "KOORD_SERVER"

ServerOpt = Annotated[
    str,
    typer.Option(
        metavar="URL",
        envvar=SERVER_ENV,
        show_envvar=True,
        help="Base URL of the running koord service (koord scheduler).",
    ),
]
InsecureOpt = Annotated[
    bool,
    typer.Option(
        "--insecure-skip-tls-verify",
        "--insecure",
        help="Do not verify the service's certificate (self-signed development certificates).",
    ),
]
CAOpt = Annotated[
    Path | None,
    typer.Option(
        "--certificate-authority",
        metavar="FILE",
        help="CA bundle (PEM) that signed the service's certificate, as kubectl's flag of that name.",
    ),
]

ClientCertOpt = Annotated[
    Path | None,
    typer.Option(
        "--client-certificate",
        metavar="FILE",
        help="Client certificate (PEM) for a service started with --client-ca-file, as kubectl's flag of that name.",
    ),
]
ClientKeyOpt = Annotated[
    Path | None,
    typer.Option("--client-key", metavar="FILE", help="The client certificate's private key (PEM)."),
]
KubeconfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig whose user's credentials (token, exec plugin, client certificate) are sent to the service "
        "(default: as kubectl finds it).",
    ),
]
ContextOpt = Annotated[
    str | None, typer.Option("--context", help="The kubeconfig context whose user's credentials are sent.")
]

#: Hosts credentials may be sent to over plain HTTP (a ``kubectl port-forward`` listens there).
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code`` (2: bad input or no answer)."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _verify(insecure: bool, ca: Path | None) -> bool | ssl.SSLContext:
    """httpx's ``verify``: off, a context trusting the CA file, or the system store.

    Raises:
        typer.Exit: both given, or the CA file is missing or holds no certificate (code 2).
    """
    if insecure and ca is not None:
        fail("--certificate-authority and --insecure-skip-tls-verify exclude each other")
    if ca is None:
        return not insecure
    if not ca.is_file():
        fail(f"--certificate-authority {ca}: no such file")
    try:
        return ssl.create_default_context(cafile=str(ca))
    except (ssl.SSLError, OSError) as exc:
        fail(f"--certificate-authority {ca}: not a PEM CA bundle ({exc})")


def _with_client_cert(verify: bool | ssl.SSLContext, cert: Path, key: Path | None) -> ssl.SSLContext:
    """``verify`` as an SSL context that also presents the client certificate ``cert`` (its key in ``key``, or in
    ``cert`` itself when None).

    Raises:
        typer.Exit: the certificate or key cannot be loaded (code 2).
    """
    if isinstance(verify, ssl.SSLContext):
        context = verify
    else:
        context = ssl.create_default_context()
        if not verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
    try:
        context.load_cert_chain(str(cert), str(key) if key is not None else None)
    except (ssl.SSLError, OSError) as exc:
        fail(f"--client-certificate {cert}: cannot load it{f' with --client-key {key}' if key else ''} ({exc})")
    return context


def kube_credentials(server: str, kubeconfig: Path | None, context: str | None) -> Any:
    """The kubeconfig's :class:`kubernetes.client.Configuration` whose credentials go to ``server`` (module
    docstring), or None: ``server`` is plain HTTP to another host than loopback, or no kubeconfig was found and
    none was named.

    Raises:
        typer.Exit: a named ``--kubeconfig`` / ``--context`` cannot be loaded (code 2); credentials named for
            a plain-HTTP server that is not loopback (code 2).
    """
    from app.client.config import ConfigException, load_configuration

    parsed = httpx.URL(server)
    if parsed.scheme != "https" and parsed.host not in LOOPBACK_HOSTS:
        if kubeconfig is not None or context is not None:
            fail(f"{server} is plain HTTP and not loopback: credentials are sent only over HTTPS (use https://)")
        return None
    try:
        return load_configuration(str(kubeconfig) if kubeconfig is not None else None, context=context)
    except (ConfigException, OSError) as exc:
        if kubeconfig is None and context is None:
            return None  # no kubeconfig anywhere: an embedded service needs no credentials
        named = f" {kubeconfig}" if kubeconfig else ""
        named += f" context {context!r}" if context else ""
        fail(f"no usable kubeconfig{named}: {exc}")


def connection(
    server: str,
    insecure: bool = False,
    ca: Path | None = None,
    client_cert: Path | None = None,
    client_key: Path | None = None,
    kubeconfig: Path | None = None,
    context: str | None = None,
) -> tuple[bool | ssl.SSLContext, httpx.Auth | None]:
    """httpx's ``verify`` (the service's CA, the client certificate to present) and ``auth`` (the kubeconfig's
    token, per request) for asking ``server``, from the options of :func:`request`.

    Raises:
        typer.Exit: conflicting or unusable TLS options or credentials (code 2).
    """
    verify = _verify(insecure, ca)
    if client_key is not None and client_cert is None:
        fail("--client-key needs --client-certificate")
    credentials = kube_credentials(server, kubeconfig, context)
    auth = None
    if credentials is not None:
        from app.client.config import ConfigurationAuth

        auth = ConfigurationAuth(credentials)
        if client_cert is None and credentials.cert_file and server.startswith("https"):
            client_cert = Path(credentials.cert_file)
            client_key = Path(credentials.key_file) if credentials.key_file else None
    if client_cert is not None:
        verify = _with_client_cert(verify, client_cert, client_key)
    return verify, auth


def request(
    method: str,
    server: str,
    path: str,
    *,
    insecure: bool = False,
    ca: Path | None = None,
    body: Any = None,
    not_found_hint: str | None = None,
    client_cert: Path | None = None,
    client_key: Path | None = None,
    kubeconfig: Path | None = None,
    context: str | None = None,
) -> Any:
    """``method`` ``server + path`` (JSON ``body`` when given) with the kubeconfig's credentials
    (:func:`kube_credentials`) and the decoded JSON answer.

    Args:
        client_cert, client_key: the client certificate (and its key) to present over HTTPS, instead of the
            kubeconfig's.
        not_found_hint: said instead of the body on a 404 without ``{"message": ...}`` (no such route,
            e.g. a plugin that is not enabled).
        kubeconfig, context: where the credentials come from (None: as kubectl finds them).

    Raises:
        typer.Exit: code 1 on 404, code 2 when unreachable or on any other status, with the reason.
    """
    verify, auth = connection(server, insecure, ca, client_cert, client_key, kubeconfig, context)
    url = f"{server.rstrip('/')}{path}"
    headers = {"Content-Type": "application/json"} if body is not None else {}
    try:
        resp = httpx.request(
            method,
            url,
            content=orjson.dumps(body) if body is not None else None,
            headers=headers,
            timeout=10.0,
            verify=verify,
            auth=auth,
        )
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:  # connected, but no HTTP answer came
        fail(_not_http_answer(server, url, exc))
    except httpx.ConnectError as exc:
        fail(_connect_failure(server, exc))
    except httpx.HTTPError as exc:
        fail(f"cannot reach {server}: {exc}")
    try:
        answer = resp.json()
    except ValueError:
        answer = _NOT_JSON
    if answer is _NOT_JSON:
        kind = resp.headers.get("content-type", "no content type").split(";")[0]
        fail(
            f"{server} answered HTTP {resp.status_code} with {kind}, not the JSON of a koord service: "
            f"is it the address of koord scheduler (--server, or {SERVER_ENV})?"
        )
    if resp.status_code != 200:
        has_message = isinstance(answer, dict) and "message" in answer
        message = answer["message"] if has_message else resp.text
        if resp.status_code == 404 and not has_message and not_found_hint:
            message = not_found_hint
        fail(f"{server} answered {resp.status_code}: {message}", 1 if resp.status_code == 404 else 2)
    return answer


_NOT_JSON = object()


def _speaks_tls(host: str, port: int) -> bool:
    """Whether ``host:port`` completes a TLS handshake (certificate not checked: only the protocol)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout=3.0) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            return True
    except (OSError, ssl.SSLError):
        return False


def _not_http_answer(server: str, url: str, exc: Exception) -> str:
    """What to say when ``server`` took the connection but sent no HTTP answer (httpx's "Server
    disconnected without sending a response"): a TLS port asked over ``http://``, or not a koord service."""
    parsed = httpx.URL(url)
    host, port = parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80)
    if parsed.scheme == "http" and _speaks_tls(host, port):
        https = str(parsed.copy_with(scheme="https", path="/", query=None)).rstrip("/")
        return f"{server} speaks TLS (HTTPS), not plain HTTP: use --server {https}"
    return f"{server} accepted the connection but sent no HTTP answer ({exc}): is it a koord service?"


def _connect_failure(server: str, exc: Exception) -> str:
    """What to say when the connection failed: refused, unknown host, or a TLS handshake that failed
    because the port speaks plain HTTP (``https://`` asked of ``http://``)."""
    text = str(exc)
    if "WRONG_VERSION_NUMBER" in text or "record layer failure" in text or "packet length too long" in text:
        http = server.replace("https://", "http://", 1)
        return f"{server} does not speak TLS (the TLS handshake got a plain answer): use --server {http}"
    return f"cannot reach {server}: {text}"
