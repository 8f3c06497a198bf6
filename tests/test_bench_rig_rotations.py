"""bench/rig_rotations.py without a rig: its flags and environment are checked before anything starts (exit 2 with
the reason), and the Prometheus samples it sums are the ones its patterns name."""

from __future__ import annotations

import http.server
import json
import os
import runpy
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "rig_rotations.py"


def _run(*args: str, rig: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RIG"}
    if rig is not None:
        env["RIG"] = rig
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_bad_flags_and_a_missing_rig_exit_2_with_the_reason(tmp_path: Path) -> None:
    unknown = _run("--modes", "noop,bogus", rig=str(tmp_path))
    assert unknown.returncode == 2 and "unknown modes ['bogus']" in unknown.stderr
    before = _run("--modes", "koord,koord-before", rig=str(tmp_path))
    assert before.returncode == 2 and "mode koord-before needs --koord-before" in before.stderr
    no_rig = _run("--modes", "noop")
    assert no_rig.returncode == 2 and "RIG is not set" in no_rig.stderr
    assert not (tmp_path / "run").exists()  # nothing was started


def test_samples_are_summed_by_name_and_labels() -> None:
    sample_sum = runpy.run_path(str(SCRIPT))["sample_sum"]
    text = "\n".join(
        [
            "# HELP scheduler_framework_extension_point_duration_seconds x",
            'scheduler_framework_extension_point_duration_seconds_sum{extension_point="Filter",status="Success"} 1.5',
            'scheduler_framework_extension_point_duration_seconds_sum{extension_point="Filter",status="Error"} 0.25',
            'scheduler_framework_extension_point_duration_seconds_sum{extension_point="Score",status="Success"} 4',
            "scheduler_scheduling_algorithm_duration_seconds_sum 2.5e-1",
            "scheduler_scheduling_algorithm_duration_seconds_count 10",
        ]
    )
    filter_pattern = r'scheduler_framework_extension_point_duration_seconds_sum\{extension_point="Filter".*'
    assert sample_sum(text, filter_pattern) == 1.75
    assert sample_sum(text, r"scheduler_scheduling_algorithm_duration_seconds_sum") == 0.25
    assert sample_sum(text, r"scheduler_scheduling_algorithm_duration_seconds") == 0.0  # whole names only


def test_sigterm_stops_the_extender_it_started(tmp_path: Path) -> None:
    """Killed with SIGTERM mid-run, the script still stops its extender: a leftover would keep the port and be measured
    by the next run in place of its own."""
    rig, scripts = tmp_path / "rig", tmp_path / "scripts"
    (rig / "bin").mkdir(parents=True)
    scripts.mkdir()
    started = tmp_path / "noop.pid"
    noop = rig / "bin" / "noop-extender"
    noop.write_text(f"#!/bin/sh\necho $$ > {started}.tmp && mv {started}.tmp {started}\nexec sleep 300\n")
    noop.chmod(0o755)
    (scripts / "cleanup-pods.sh").write_text("exit 0\n")
    (scripts / "bench-nodemetrics.py").write_text("import time\ntime.sleep(300)\n")
    env = {**os.environ, "RIG": str(rig)}
    proc = subprocess.Popen(
        [
            sys.executable,
            str(SCRIPT),
            "--modes",
            "noop",
            "--rotations",
            "1",
            "--no-settle",
            "--rig-scripts",
            str(scripts),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = int(started.read_text())
        time.sleep(1.5)  # past the script's own second of waiting, into the NodeMetrics step
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid)
    finally:
        proc.kill()
        proc.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purpose: it holds no port
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_settle_deletes_the_events_then_compacts_and_defragments_etcd(tmp_path: Path) -> None:
    """Before a run: one DeleteCollection of the Events (through the rig's kubectl), then etcd compacted to the
    revision it reports and defragmented, in that order, over etcd's v3 JSON gateway (int64 as strings)."""
    rig = tmp_path / "rig"
    (rig / "bin").mkdir(parents=True)
    kubectl_args = tmp_path / "kubectl.args"
    kubectl = rig / "bin" / "kubectl"
    kubectl.write_text(f'#!/bin/sh\necho "$@" >> {kubectl_args}\n')
    kubectl.chmod(0o755)
    calls: list[tuple[str, dict[str, object]]] = []
    sizes = iter(["7340032", "1048576"])

    class Etcd(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            calls.append((self.path, body))
            answer: dict[str, object] = {"header": {"revision": "4242"}}
            if self.path == "/v3/maintenance/status":
                answer["dbSize"] = next(sizes)
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Etcd)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        module = runpy.run_path(str(SCRIPT))
        done = module["settle"](module["Rig"](rig, tmp_path, sys.executable), f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
    assert kubectl_args.read_text().split() == ["delete", "--raw", "/api/v1/namespaces/default/events"]
    assert calls == [
        ("/v3/maintenance/status", {}),
        ("/v3/kv/compaction", {"revision": 4242, "physical": True}),
        ("/v3/maintenance/defragment", {}),
        ("/v3/maintenance/status", {}),
    ]
    assert done == {"revision": 4242, "db_mb": [7.0, 1.0]}


def test_settle_fails_loudly_when_etcd_does_not_answer(tmp_path: Path) -> None:
    """No etcd: the run stops with the error rather than measuring an unsettled store."""
    rig = tmp_path / "rig"
    (rig / "bin").mkdir(parents=True)
    (rig / "bin" / "kubectl").write_text("#!/bin/sh\nexit 0\n")
    (rig / "bin" / "kubectl").chmod(0o755)
    module = runpy.run_path(str(SCRIPT))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(OSError):
        module["settle"](module["Rig"](rig, tmp_path, sys.executable), f"http://127.0.0.1:{port}")


def test_api_requests_are_summed_by_verb_and_resource() -> None:
    """Codes, scopes and other labels are summed together; a subresource is named after its resource."""
    api_requests = runpy.run_path(str(SCRIPT))["api_requests"]
    text = "\n".join(
        [
            "# TYPE apiserver_request_total counter",
            'apiserver_request_total{code="201",component="apiserver",resource="pods",subresource="",verb="POST"} 10',
            'apiserver_request_total{code="409",component="apiserver",resource="pods",subresource="",verb="POST"} 2',
            'apiserver_request_total{code="201",resource="pods",subresource="binding",verb="POST",version="v1"} 7',
            'apiserver_request_total{code="200",resource="nodes",scope="cluster",verb="LIST"} 3',
            'apiserver_request_duration_seconds_count{resource="pods",verb="POST"} 99',
        ]
    )
    assert api_requests(text) == {"POST pods": 12.0, "POST pods/binding": 7.0, "LIST nodes": 3.0}


def test_machine_shares_split_busy_from_steal() -> None:
    """``/proc/stat``'s ticks between two readings: busy is what the guest ran (not idle, iowait or steal), steal what
    the hypervisor took; a missing reading gives nothing rather than a made-up share."""
    ns = runpy.run_path(str(SCRIPT))
    shares, ticks = ns["machine_shares"], ns["machine_ticks"]
    #          user nice system idle iowait irq softirq steal guest guest_nice
    before = [1000, 0, 200, 5000, 10, 0, 50, 40, 0, 0]
    after = [1600, 0, 300, 5200, 10, 0, 50, 140, 7, 0]  # 1,000 ticks: 700 busy, 200 idle, 100 steal (guest not counted)
    assert shares(before, after) == {"busy": 0.7, "steal": 0.1}
    assert shares([], after) == {} and shares(before, after[:4]) == {}
    now = ticks()
    assert len(now) >= 8 and all(isinstance(t, int) for t in now)


def test_pynoop_serves_kube_scheduler_verbs_from_the_repository_root(tmp_path: Path) -> None:
    """Mode ``pynoop``'s command really is an extender: ready on its port, every node kept on the captured
    ``/filter`` body, every node scored 0."""
    from tests.conftest import free_port

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    port = free_port()
    argv = runpy.run_path(str(SCRIPT))["pynoop_argv"](sys.executable, str(kubeconfig), port)
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "the no-op exited"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the no-op never listened"
                time.sleep(0.1)
        import http.client

        body = (REPO / "tests" / "fixtures" / "wire-samples" / "filter.json").read_bytes()
        names = json.loads(body)["NodeNames"]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/readyz")
        ready = conn.getresponse()
        assert (ready.status, ready.read()) == (200, b"ok")
        conn.request("POST", "/filter", body, {"Content-Type": "application/json"})
        kept = conn.getresponse()
        assert kept.status == 200 and json.loads(kept.read())["NodeNames"] == names
        conn.request("POST", "/prioritize", body, {"Content-Type": "application/json"})
        scored = conn.getresponse()
        assert scored.status == 200 and json.loads(scored.read()) == [{"Host": n, "Score": 0} for n in names]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
