"""The documentation runs as written and builds.

- Every code block marked ``<!-- doc-test -->`` in README.md and docs/*.md runs from the repository root
  and exits 0 (commands that need no cluster: the descheduler's dry run, ``koord sim`` on the bundled
  trace, ...). A block marked ``<!-- doc-test: service -->`` runs against ``koord scheduler`` started on
  the embedded example cluster, as a reader would after ``make run`` (its port is free, given through
  ``KOORD_SERVER``; ``localhost:9876`` in the block is that port).
- The CLI reference is rendered from the typer app (docs/hooks/cli_reference.py): every command and option
  appears, so the page cannot drift from ``koord --help``.
- ``mkdocs build --strict`` passes: no broken link, no page that fails to render.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from app.cli.reference import MARKER, expand, find, render_markdown, walk
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MARK = re.compile(r"<!-- doc-test(?:: (?P<kind>service))? -->\n```(?:sh|bash|console)?\n(?P<body>.*?)```", re.S)


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _blocks(kind: str | None) -> list[tuple[str, str]]:
    """(``page:line``, block) of every marked block of that kind."""
    out = []
    for page in _pages():
        text = page.read_text()
        for m in MARK.finditer(text):
            if m.group("kind") == kind:
                line = text.count("\n", 0, m.start()) + 1
                out.append((f"{page.relative_to(ROOT)}:{line}", m.group("body")))
    return out


def _run(block: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = block.replace(".venv/bin/", f"{BIN}/")  # the interpreter running the tests, wherever it lives
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _said(where: str, block: str, result: subprocess.CompletedProcess[str]) -> str:
    return f"{where}\n{block}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KOORD_SERVER"}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **extra}


def test_there_are_documented_commands() -> None:
    """The markers are where the docs say: the tour (with a service) and the commands that need none."""
    assert len(_blocks(None)) >= 3 and len(_blocks("service")) >= 2
    readme = (ROOT / "README.md").read_text()
    assert "make run" in readme and "make test" in readme
    assert len(readme.splitlines()) <= 300  # a short user's guide; the rest is in docs/


@pytest.mark.parametrize(("where", "block"), _blocks(None), ids=[w for w, _ in _blocks(None)])
def test_documented_command_runs(where: str, block: str) -> None:
    result = _run(block, _env())
    assert result.returncode == 0, _said(where, block, result)


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    """``koord scheduler`` on the embedded example cluster, as ``make run`` starts it (on a free port)."""
    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "koord"), "scheduler", "--port", str(port), "--host", "127.0.0.1"],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else "koord scheduler exited"
            time.sleep(0.2)
        else:
            pytest.fail("koord scheduler did not become ready")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(("where", "block"), _blocks("service"), ids=[w for w, _ in _blocks("service")])
def test_documented_tour_runs(service: str, where: str, block: str) -> None:
    port = service.rsplit(":", 1)[1]
    result = _run(block.replace("localhost:9876", f"127.0.0.1:{port}"), _env(KOORD_SERVER=service))
    assert result.returncode == 0, _said(where, block, result)
    assert "error" not in result.stderr.lower(), result.stderr


def test_cli_reference_covers_every_command_and_option() -> None:
    page = (ROOT / "docs" / "cli.md").read_text()
    assert MARKER in page
    hooks = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["hooks"]
    assert "docs/hooks/cli_reference.py" in hooks
    rendered = render_markdown()
    assert expand(page).count(rendered) == 1 and MARKER not in expand(page)
    paths = list(walk())
    assert ("koord", "scheduler") in paths and ("koord", "gang", "list") in paths
    for path in paths:
        assert f"`{' '.join(path)}`" in rendered, path
        for param in find(path).params:
            for name in getattr(param, "opts", []):
                if name.startswith("--"):
                    assert name in rendered, (path, name)


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    mkdocs = BIN / "mkdocs"
    if not mkdocs.exists():
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    result = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=_env(NO_MKDOCS_2_WARNING="1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    reference = (tmp_path / "site" / "cli" / "index.html").read_text()
    assert "koord scheduler" in reference and "--allowed-webhook-client-names" in reference
