"""Asking a running service: the ``--server``, ``--certificate-authority`` and ``--insecure`` options of
``koord quota | gang | reservation | explain`` and one GET / POST helper with their exit codes.

Exit codes: 1 the service answered 404 (the object does not exist), 2 anything else that kept the
command from an answer (unreachable, TLS failure, another error status).
"""

from __future__ import annotations

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

ServerOpt = Annotated[str, typer.Option(metavar="URL", help="Base URL of the running service.")]
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


def request(
    method: str,
    server: str,
    path: str,
    *,
    insecure: bool = False,
    ca: Path | None = None,
    body: Any = None,
    not_found_hint: str | None = None,
) -> Any:
    """``method`` ``server + path`` (JSON ``body`` when given) and the decoded JSON answer.

    Args:
        not_found_hint: said instead of the body on a 404 without ``{"message": ...}`` (no such route,
            e.g. a plugin that is not enabled).

    Raises:
        typer.Exit: code 1 on 404, code 2 when unreachable or on any other status, with the reason.
    """
    verify = _verify(insecure, ca)
    url = f"{server.rstrip('/')}{path}"
    try:
        if body is None:
            resp = httpx.request(method, url, timeout=10.0, verify=verify)
        else:
            resp = httpx.request(
                method,
                url,
                content=orjson.dumps(body),
                headers={"Content-Type": "application/json"},
                timeout=10.0,
                verify=verify,
            )
    except httpx.HTTPError as exc:
        fail(f"cannot reach {server}: {exc}")
    if resp.status_code != 200:
        try:
            answer = resp.json()
        except ValueError:
            answer = None
        has_message = isinstance(answer, dict) and "message" in answer
        message = answer["message"] if has_message else resp.text
        if resp.status_code == 404 and not has_message and not_found_hint:
            message = not_found_hint
        fail(f"{server} answered {resp.status_code}: {message}", 1 if resp.status_code == 404 else 2)
    return resp.json()
