"""A bad cluster file at start: ``koord scheduler`` exits 2 with one line naming the file, the line and the problem,
never a uvicorn traceback (exit 3 before issue 28). Real processes (subprocess); also the start-up warning that,
without a client CA, the inspection calls that run the plugins are open."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_logs_and_start import koord
from tests.conftest import free_port

NODE = b"apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n"
NO_KIND = NODE + b"---\napiVersion: v1\nmetadata: {name: x}\n"


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("bad.yaml", NODE + b"  labels: {a: [unclosed\n", "bad.yaml:6: not valid YAML: while parsing a flow sequence"),
        ("latin1.yaml", NODE + b"  annotations: {note: caf\xe9}\n", "latin1.yaml:5: not UTF-8: byte 0xe9 at offset 72"),
        ("list.yaml", b"- 1\n- 2\n", "list.yaml:1: document 1: expected an object with apiVersion and kind, got list"),
        (
            "nokind.yaml",
            NODE + b"---\napiVersion: v1\nmetadata: {name: x}\n",
            "nokind.yaml:6: document 2: missing kind",
        ),
        (
            "items.json",
            b'{"kind": "NodeList", "apiVersion": "v1",\n "items": [\n  {"metadata": {"name": "a"}},\n'
            b'  {"metadata": {}}]}',
            "items.json:4: document 1 items[1]: Node without metadata.name",
        ),
        ("bad.json", b'{"kind": "Node",\n "metadata": {"name": "a",}}', "bad.json:2: not valid JSON:"),
    ],
    ids=["bad-yaml", "not-utf8", "not-an-object", "no-kind", "list-item", "bad-json"],
)
def test_a_bad_cluster_file_exits_2_with_one_line(tmp_path: Path, name: str, content: bytes, expected: str) -> None:
    (tmp_path / "good.yaml").write_bytes(NODE.replace(b"n1", b"n0"))
    (tmp_path / name).write_bytes(content)
    proc = koord("scheduler", "--host", "127.0.0.1", "--port", str(free_port()), "--cluster", str(tmp_path))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert errors[0].startswith(f"error: bad cluster file: {tmp_path / name}"), errors[0]
    assert expected in errors[0], errors[0]


@pytest.mark.parametrize(
    ("host", "said"),
    [
        (
            "127.0.0.1",
            "INFO koord: embedded mode without --client-ca-file: inspection (/apis/v1/..., /ui) and /metrics stay "
            "open on loopback (127.0.0.1:{port}), as before",
        ),
        (
            "0.0.0.0",
            "WARNING koord: embedded mode without --client-ca-file: inspection (/apis/v1/..., /ui) and /metrics are "
            "open to anyone who reaches 0.0.0.0:{port}; bind --host 127.0.0.1 or pass --client-ca-file",
        ),
    ],
    ids=["loopback", "any-address"],
)
def test_without_a_client_ca_the_start_up_says_what_is_open(tmp_path: Path, host: str, said: str) -> None:
    (tmp_path / "bad.yaml").write_bytes(b"kind: [")  # stop right after the start-up lines
    port = free_port()
    proc = koord("scheduler", "--host", host, "--port", str(port), "--cluster", str(tmp_path))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    warning = [line for line in err.splitlines() if "no --client-ca-file" in line]
    assert len(warning) == 1, err
    assert "extender verbs" in warning[0] and "webhooks" in warning[0]
    assert said.format(port=port) in err, err
