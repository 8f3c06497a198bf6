"""What every client command shares: the server from ``--server``, else ``$KOORD_SERVER``, else the
default; a clear word when the address answers but is not a koord service (another HTTP server, a TLS
port asked over ``http://``, a plain port asked over ``https://``); empty listings that say so; and help
that shows every option name whole at 80 columns, wrapping descriptions instead."""

from __future__ import annotations

import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.cli.reference import find, walk
from app.cli.remote import DEFAULT_SERVER, SERVER_ENV
from app.sources.files import FileSource
from tests.conftest import EXAMPLE_CLUSTER, LiveServer, free_port
from tests.server.test_client_auth_https import TLSServer

#: Client commands that ask the service and what they print on the example cluster.
CLIENTS = [
    (["quota", "list"], None),
    (["gang", "list"], "No gangs found."),
    (["reservation", "list"], "No reservations found."),
    (["explain", "--pod", str(EXAMPLE_CLUSTER.parent / "pod.yaml")], "node-hot"),
]


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    cluster = tmp_path_factory.mktemp("cluster")
    for f in EXAMPLE_CLUSTER.iterdir():
        shutil.copy(f, cluster / f.name)
    with LiveServer(FileSource(cluster, poll_interval=0)) as srv:
        yield srv


@pytest.fixture(scope="module")
def html_server() -> Iterator[str]:
    """Another HTTP service on the port: answers every path with an HTML 404."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize(("args", "says"), CLIENTS, ids=lambda a: " ".join(a) if isinstance(a, list) else "")
def test_server_from_the_environment(example: LiveServer, args: list[str], says: str | None) -> None:
    result = CliRunner().invoke(cli, args, env={SERVER_ENV: example.url})
    assert result.exit_code == 0, result.output
    if says:
        assert says in result.output


@pytest.mark.parametrize(("args", "says"), CLIENTS, ids=lambda a: " ".join(a) if isinstance(a, list) else "")
def test_server_flag_beats_the_environment(example: LiveServer, args: list[str], says: str | None) -> None:
    unreachable = f"http://127.0.0.1:{free_port()}"
    ok = CliRunner().invoke(cli, [*args, "--server", example.url], env={SERVER_ENV: unreachable})
    assert ok.exit_code == 0, ok.output
    bad = CliRunner().invoke(cli, [*args, "--server", unreachable], env={SERVER_ENV: example.url})
    assert bad.exit_code == 2 and f"cannot reach {unreachable}" in bad.output


def test_default_server_without_flag_or_environment() -> None:
    assert DEFAULT_SERVER == "http://127.0.0.1:9876"
    help_text = CliRunner().invoke(cli, ["gang", "list", "--help"], env={"COLUMNS": "200"}).output
    assert SERVER_ENV in help_text and DEFAULT_SERVER in help_text


def test_empty_listings_say_so(example: LiveServer) -> None:
    runner = CliRunner()
    gangs = runner.invoke(cli, ["gang", "list", "--server", example.url])
    assert gangs.exit_code == 0 and gangs.output.strip() == "No gangs found."  # no bare header
    names = runner.invoke(cli, ["reservation", "list", "--server", example.url, "-o", "name"])
    assert names.exit_code == 0 and names.output.strip() == "No reservations found."
    as_json = runner.invoke(cli, ["gang", "list", "--server", example.url, "-o", "json"])
    assert as_json.exit_code == 0 and as_json.stdout.strip() == "{}"  # machine output stays the answer


@pytest.mark.parametrize("args", [a for a, _ in CLIENTS], ids=" ".join)
def test_not_a_koord_service(html_server: str, args: list[str]) -> None:
    result = CliRunner().invoke(cli, [*args, "--server", html_server])
    assert result.exit_code == 2
    assert "not the JSON of a koord service" in result.output and "text/html" in result.output


def test_tls_port_asked_over_http_and_plain_port_over_https(example: LiveServer, tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    assert CliRunner().invoke(cli, ["certs", "--out-dir", str(certs)]).exit_code == 0
    cluster = tmp_path / "cluster"
    shutil.copytree(EXAMPLE_CLUSTER, cluster)
    with TLSServer(certs, cluster, None) as srv:
        over_http = CliRunner().invoke(cli, ["gang", "list", "--server", f"http://127.0.0.1:{srv.port}"])
        assert over_http.exit_code == 2, over_http.output
        assert "speaks TLS (HTTPS)" in over_http.output
        assert f"--server https://127.0.0.1:{srv.port}" in over_http.output
        assert "Server disconnected" not in over_http.output
    plain = example.url.replace("http://", "https://")
    over_https = CliRunner().invoke(cli, ["gang", "list", "--server", plain, "--insecure"])
    assert over_https.exit_code == 2 and "does not speak TLS" in over_https.output, over_https.output


COMMANDS = list(walk())


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_at_80_columns_shows_every_option_whole(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path[1:], "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    assert "…" not in result.output
    command = find(path)
    for param in command.params:
        for name in [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]:
            if name.startswith("-"):
                assert name in result.output.replace("\n", " ").split(" ") or f"{name}," in result.output, (
                    name,
                    result.output,
                )
    too_wide = [line for line in result.output.splitlines() if len(line) > 80]
    assert not too_wide, too_wide
    for python_name in ("<str>", "<int>", "<float>", "<bool>", "<path>", "<Path>", "<file>"):
        assert python_name not in result.output, result.output
    assert not re.search(r"\{[A-Z_]+\}", result.output), result.output  # "show NAME", not "show {NAME}"


def test_help_uses_the_terminal_width() -> None:
    """The real process reads the terminal's width (COLUMNS): wider than 80, the descriptions use it."""
    koord = Path(sys.executable).with_name("koord")

    def render(columns: int) -> list[str]:
        env = {**os.environ, "COLUMNS": str(columns)}
        out = subprocess.run([str(koord), "scheduler", "--help"], env=env, capture_output=True, text=True, check=True)
        return out.stdout.splitlines()

    narrow, wide = render(80), render(160)
    assert max(map(len, narrow)) <= 80 < max(map(len, wide)) <= 160
    assert len(wide) < len(narrow)
