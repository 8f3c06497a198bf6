"""Rotations of extenders on the real control plane of ``../shared/rig``: one JSON line per run (issue 47).

What it runs
    For each rotation, each mode in turn (the order flipped every other rotation, so no mode always runs first):
    the previous extender stopped, the bench pods deleted (``cleanup-pods.sh``), the Events left deleted and etcd
    compacted and defragmented (``--no-settle`` skips it; see :func:`settle`), the extender started and ready,
    the NodeMetrics stamped again (``bench-nodemetrics.py``), kube-scheduler restarted with the rig's config for
    that extender (``restart-sched.sh noop|prod`` with QPS 1000 / burst 2000, the shipped two-entry extender
    configuration), then the rig's load (``bench.py``: ``--pods`` pods from 32 clients, pods/s from the first
    create to the last bound). Modes:

    - ``noop``: the rig's Go no-op extender (the floor);
    - ``koord``: ``--koord`` (a ``koord`` executable) as ``koord scheduler --role extender``;
    - ``koord-before``: ``--koord-before``, another build of the same, for A/B runs in the same rotations
      (``--koord-flags`` and ``--koord-before-flags`` add flags to either, e.g. the same build with another
      ``--cpu-slice-ms``);
    - ``pynoop``: the Python no-op extender of ``bench/noopextender.py`` (the service's HTTP stack and API client,
      no cache, no plugins) on koord's port and configuration, on the interpreter of ``--koord``'s environment:
      what any extender served by this stack costs, apart from koord's own work;
    - ``noop-watch``: the no-op serving kube-scheduler while ``--koord`` runs beside it only watching;
    - ``noop-curl-json``, ``noop-curl-proto``: the no-op, and beside it ``curl`` watching all pods and dropping the
      bytes, as JSON (what koord asks for) or protobuf (what client-go asks for): the API server's cost of a watch.

What it prints, per run
    ``pods_per_s``; ``extender_cpu_ms_per_pod`` (user + system CPU of the extender processes over the load, per
    pod) and the same for etcd, kube-apiserver and kube-scheduler; from kube-scheduler's own ``/metrics`` over the
    load, ms per pod: ``algorithm`` (``scheduler_scheduling_algorithm_duration_seconds``: the serial cycle,
    extender calls included), ``fw_filter`` and ``fw_score`` (its framework's Filter and Score extension points) and
    ``extenders`` (the algorithm less those two: the extender round trips, PreFilter and PreScore); for koord, its
    own ``koord_extender_request_duration_seconds`` means per verb (ms) and
    ``koord_extender_prioritize_ahead_total`` by outcome; ``api_requests_per_pod``, the API server's
    ``apiserver_request_total`` over the load per pod, by verb and resource (every client's).

Needs the rig up (its README: ``up.sh``, the CRDs applied, ``mknodes.py n- N``) and ``RIG`` set; the rig's
scripts are found in ``--rig-scripts``. Never a test dependency. Run from the repository root::

    RIG=$HOME/rig .venv/bin/python bench/rig_rotations.py --nodes 500 --rotations 4 \\
        --modes noop,koord,koord-before --koord .venv/bin/koord --koord-before /path/to/old/.venv/bin/koord
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ADMIN_TOKEN = "rig-admin-token"  # the rig's system:masters token (its README)
KOORD_PORT, NOOP_PORT = 9876, 9877  # the ports the rig's sched-prod.yaml / sched-noop.yaml call
ETCD = "http://127.0.0.1:2379"  # the rig's etcd (its up.sh)
MODES = ("noop", "koord", "koord-before", "pynoop", "noop-watch", "noop-curl-json", "noop-curl-proto")
REPO = Path(__file__).resolve().parent.parent  # the repository root, where ``bench`` imports from
#: what ``noop-curl-*`` ask the API server for: the pod watch as JSON (koord's) or protobuf (client-go's)
CURL_ACCEPT = {"noop-curl-json": "application/json", "noop-curl-proto": "application/vnd.kubernetes.protobuf"}


def scrape(url: str) -> str:
    """The text of a ``/metrics`` endpoint read with the rig's admin token ('' when it does not answer)."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    try:
        with urllib.request.urlopen(request, context=ssl._create_unverified_context(), timeout=10) as answer:
            return str(answer.read().decode())
    except OSError:
        return ""


def samples(text: str) -> Iterator[tuple[str, float]]:
    """Each sample of ``text`` (Prometheus text format) as (name with its labels, value); comments skipped."""
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            yield name, float(value)


def sample_sum(text: str, pattern: str) -> float:
    """The sum of every sample of ``text`` (Prometheus text format) whose name and labels match ``pattern``."""
    return sum((value for name, value in samples(text) if re.fullmatch(pattern, name)), 0.0)


def api_requests(text: str) -> dict[str, float]:
    """``apiserver_request_total`` of ``text`` summed by ``VERB resource[/subresource]`` (codes and scopes
    together)."""
    out: dict[str, float] = {}
    for name, value in samples(text):
        if name.startswith("apiserver_request_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', name))
            resource = labels.get("resource", "") + ("/" + labels["subresource"] if labels.get("subresource") else "")
            key = f"{labels.get('verb', '')} {resource}"
            out[key] = out.get(key, 0.0) + value
    return out


def etcd_call(etcd: str, path: str, body: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
    """POST ``body`` to the v3 JSON gateway of the etcd at ``etcd`` (``http://127.0.0.1:2379``) at ``path``
    (``/v3/...``); its JSON answer.

    Raises:
        OSError: etcd did not answer, or answered an error.
    """
    request = urllib.request.Request(
        etcd + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return dict(json.loads(answer.read()))


def settle(rig: Rig, etcd: str = ETCD) -> dict[str, Any]:
    """Give every run the same store to start on: the Events the last runs left deleted, etcd's history compacted
    to its current revision and its file defragmented. Without it a run pays for the history of the runs before it
    (the API server compacts only every 5 minutes): etcd's CPU per pod grew from 0.96 to 2.0 ms over the three runs
    of one rotation. Returns what was done (``revision``, the file's ``db_mb`` before and after).

    Raises:
        OSError, subprocess.CalledProcessError: the API server or etcd failed.
    """
    subprocess.run(
        ["kubectl", "delete", "--raw", "/api/v1/namespaces/default/events"],  # one DeleteCollection
        env=rig.env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    status = etcd_call(etcd, "/v3/maintenance/status", {})
    revision = int(status["header"]["revision"])
    etcd_call(etcd, "/v3/kv/compaction", {"revision": revision, "physical": True})
    etcd_call(etcd, "/v3/maintenance/defragment", {})
    after = etcd_call(etcd, "/v3/maintenance/status", {})
    return {
        "revision": revision,
        "db_mb": [round(int(status["dbSize"]) / 2**20, 1), round(int(after["dbSize"]) / 2**20, 1)],
    }


def machine_ticks() -> list[int]:
    """The machine's CPU time by state since boot, in clock ticks (``/proc/stat``'s ``cpu`` line: user, nice,
    system, idle, iowait, irq, softirq, steal, ...); ``[]`` where it cannot be read."""
    try:
        with open("/proc/stat") as stat:
            return [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return []


def machine_shares(before: list[int], after: list[int]) -> dict[str, float]:
    """How the machine's CPUs spent the time between two :func:`machine_ticks`, as shares of it (0-1): ``busy``
    (neither idle nor waiting on IO) and ``steal`` (taken by the hypervisor for other guests: a run whose steal
    is high measured a busy host, not us). ``{}`` when either reading is missing."""
    if len(before) < 8 or len(after) < 8:
        return {}
    delta = [a - b for a, b in zip(after[:8], before[:8], strict=True)]
    total = sum(delta) or 1
    return {"busy": round(1 - (delta[3] + delta[4] + delta[7]) / total, 3), "steal": round(delta[7] / total, 3)}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (0.0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Rig:
    """The rig's processes and scripts."""

    def __init__(self, rig: Path, scripts: Path, python: str) -> None:
        self.rig, self.scripts, self.python = rig, scripts, python
        self.env = {**os.environ, "RIG": str(rig), "E2E_WORK": str(rig / "run"), "KUBECONFIG": str(rig / "kubeconfig")}
        self.env["PATH"] = f"{rig / 'bin'}:{self.env.get('PATH', '')}"
        self.extenders: list[subprocess.Popen[bytes]] = []

    def pid(self, name: str) -> int | None:
        """The pid the rig's ``up.sh`` / ``restart-sched.sh`` wrote for ``name``."""
        try:
            return int((self.rig / "run" / f"{name}.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def script(self, *argv: str) -> None:
        """Run one of the rig's scripts (a ``.py`` under ``--python``), its output dropped.

        Raises:
            subprocess.CalledProcessError: it failed.
        """
        command = [self.python, *argv] if argv[0].endswith(".py") else ["bash", *argv]
        subprocess.run(command, cwd=self.scripts, env=self.env, check=True, stdout=subprocess.DEVNULL)

    def start(self, argv: Sequence[str], ready: str | None, cwd: Path | None = None) -> None:
        """Start an extender process (in ``cwd`` when given); wait for ``ready`` (a URL answering 200) when given.

        Raises:
            RuntimeError: it exited, or was not ready within 120 s.
        """
        log = open(self.rig / "run" / "rotations-extender.log", "ab")  # noqa: SIM115 (the child keeps it)
        self.extenders.append(subprocess.Popen(argv, env=self.env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 120
        while ready is not None:
            if self.extenders[-1].poll() is not None:
                raise RuntimeError(f"{argv[0]} exited (see {log.name})")
            try:
                with urllib.request.urlopen(ready, timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{argv[0]} not ready after 120 s")
            time.sleep(0.5)

    def stop(self) -> None:
        """Stop every extender started."""
        for proc in self.extenders:
            proc.send_signal(signal.SIGTERM)
        for proc in self.extenders:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.extenders = []


def pynoop_argv(python: str, kubeconfig: str, port: int) -> list[str]:
    """The command of mode ``pynoop``, run from the repository root (:data:`REPO`): ``python`` serving
    ``bench/noopextender.py``'s no-op on 127.0.0.1:``port`` under the service's uvicorn settings
    (:func:`bench.cycle.run_noop_extender`), its Bindings posted to the API server of ``kubeconfig``."""
    code = f"from bench.cycle import run_noop_extender; run_noop_extender({kubeconfig!r}, {port})"
    return [python, "-c", code]


def run_mode(rig: Rig, args: argparse.Namespace, mode: str, rotation: int) -> dict[str, Any]:
    """One measured run of ``mode``: the JSON line's object."""
    rig.stop()
    rig.script("cleanup-pods.sh")
    settled = settle(rig) if args.settle else None
    is_before = mode == "koord-before"
    koord = [args.koord_before if is_before else args.koord, "scheduler", "--role", "extender"]
    koord += shlex.split(args.koord_before_flags if is_before else args.koord_flags)
    koord += ["--kubeconfig", str(rig.rig / "kubeconfig"), "--host", "127.0.0.1", "--port", str(KOORD_PORT)]
    noop = [str(rig.rig / "bin" / "noop-extender"), "-addr", f"127.0.0.1:{NOOP_PORT}"]
    noop += ["-ca", str(rig.rig / "pki" / "ca.crt"), "-token", ADMIN_TOKEN]
    if mode in ("koord", "koord-before", "noop-watch"):
        rig.start(koord, f"http://127.0.0.1:{KOORD_PORT}/readyz")
    if mode == "pynoop":  # on the interpreter koord runs on
        argv = pynoop_argv(str(Path(args.koord).with_name("python")), str(rig.rig / "kubeconfig"), KOORD_PORT)
        rig.start(argv, f"http://127.0.0.1:{KOORD_PORT}/readyz", cwd=REPO)
    if mode in CURL_ACCEPT:
        curl = ["curl", "-s", "--http1.1", "--cacert", str(rig.rig / "pki" / "ca.crt"), "-o", "/dev/null"]
        curl += ["-H", f"Authorization: Bearer {ADMIN_TOKEN}", "-H", f"Accept: {CURL_ACCEPT[mode]}"]
        rig.start([*curl, "https://127.0.0.1:6443/api/v1/pods?watch=true&allowWatchBookmarks=true"], None)
    if mode.startswith("noop"):
        rig.start(noop, None)
        time.sleep(1)
    rig.script("bench-nodemetrics.py", "n-", str(args.nodes))
    rig.script("restart-sched.sh", "noop" if mode.startswith("noop") else "prod", "1000", "2000")
    time.sleep(3)
    names = ("etcd", "kube-apiserver", "kube-scheduler")
    pids = {name: rig.pid(name) for name in names}
    ext_pids = [p.pid for p in rig.extenders]
    before = {n: cpu_seconds(p) for n, p in pids.items() if p}, sum(map(cpu_seconds, ext_pids))
    sched0 = scrape("https://127.0.0.1:10259/metrics")
    api0 = api_requests(scrape("https://127.0.0.1:6443/metrics"))
    tag = f"rot-{mode}-{args.nodes}-r{rotation}"
    ticks0 = machine_ticks()
    load = subprocess.run(
        [rig.python, "bench.py", tag, str(args.pods), "32"],
        cwd=rig.scripts,
        env=rig.env,
        check=True,
        capture_output=True,
        text=True,
    )
    after = {n: cpu_seconds(p) for n, p in pids.items() if p}, sum(map(cpu_seconds, ext_pids))
    machine = machine_shares(ticks0, machine_ticks())
    sched1 = scrape("https://127.0.0.1:10259/metrics")
    asked = {k: v - api0.get(k, 0.0) for k, v in api_requests(scrape("https://127.0.0.1:6443/metrics")).items()}
    koord_metrics = scrape(f"http://127.0.0.1:{KOORD_PORT}/metrics") if mode.startswith("koord") else ""
    result = json.loads(load.stdout)
    pods = max(int(result["bound"]), 1)

    def delta(pattern: str) -> float:
        return sample_sum(sched1, pattern) - sample_sum(sched0, pattern)

    algorithm = delta(r"scheduler_scheduling_algorithm_duration_seconds_sum") * 1000
    attempts = max(delta(r"scheduler_scheduling_algorithm_duration_seconds_count"), 1.0)
    fw = {
        p: delta(rf'scheduler_framework_extension_point_duration_seconds_sum\{{extension_point="{p}".*') * 1000
        for p in ("Filter", "Score")
    }
    sched = {"algorithm": algorithm / attempts, "fw_filter": fw["Filter"] / pods, "fw_score": fw["Score"] / pods}
    sched["extenders"] = sched["algorithm"] - sched["fw_filter"] - sched["fw_score"]
    # the whole attempt, the binding cycle (the extender's /bind) included: attempt - algorithm is mostly the bind
    tried = max(delta(r'scheduler_scheduling_attempt_duration_seconds_count\{.*result="scheduled"\}'), 1.0)
    sched["attempt"] = (
        delta(r'scheduler_scheduling_attempt_duration_seconds_sum\{.*result="scheduled"\}') * 1000 / tried
    )
    out: dict[str, Any] = {
        "nodes": args.nodes,
        "rotation": rotation,
        "mode": mode,
        "pods_per_s": result["pods_per_s"],
        "bound": result["bound"],
        "extender_cpu_ms_per_pod": round((after[1] - before[1]) * 1000 / pods, 3),
        "cpu_ms_per_pod": {n: round((after[0][n] - before[0][n]) * 1000 / pods, 3) for n in after[0] if n in before[0]},
        "sched_ms_per_pod": {k: round(v, 3) for k, v in sched.items()},
        "settled": settled,
        "machine": machine,
        # what every client asked of the API server over the load, per pod (those of at least 0.01)
        "api_requests_per_pod": {k: round(n / pods, 3) for k, n in sorted(asked.items()) if n >= pods / 100},
    }
    if koord_metrics:
        out["koord_flags"] = args.koord_before_flags if is_before else args.koord_flags
        verbs = {}
        for verb in ("filter", "prioritize", "bind"):
            total = sample_sum(koord_metrics, rf'koord_extender_request_duration_seconds_sum\{{verb="{verb}"\}}')
            count = sample_sum(koord_metrics, rf'koord_extender_request_duration_seconds_count\{{verb="{verb}"\}}')
            verbs[verb] = round(total * 1000 / count, 3) if count else None
        out["koord_handler_ms"] = verbs
        out["prioritize_ahead"] = {
            o: sample_sum(koord_metrics, rf'koord_extender_prioritize_ahead_total\{{outcome="{o}"\}}')
            for o in ("used", "unusable")
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the flags, run the rotations, print one JSON line per run; 2 on a bad flag or environment."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=500, help="nodes n-0.. the rig holds (for the NodeMetrics)")
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--rotations", type=int, default=4)
    parser.add_argument("--modes", default="noop,koord", help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--koord", default=".venv/bin/koord", help="the koord executable of the build measured")
    parser.add_argument("--koord-before", default=None, help="another build's koord, for mode koord-before")
    parser.add_argument("--koord-flags", default="", help="more flags for mode koord's koord scheduler")
    parser.add_argument("--koord-before-flags", default="", help="more flags for mode koord-before's")
    parser.add_argument(
        "--settle",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="before each run, delete the Events left and compact and defragment etcd (see settle)",
    )
    parser.add_argument("--rig-scripts", type=Path, default=Path("../shared/rig"))
    parser.add_argument("--python", default=sys.executable, help="runs the rig's Python scripts (needs kubernetes)")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in modes if m not in MODES]
    if bad or ("koord-before" in modes and not args.koord_before):
        parser.error(f"unknown modes {bad}" if bad else "mode koord-before needs --koord-before")
    if not os.environ.get("RIG"):
        parser.error("RIG is not set (../shared/rig/README.md)")
    rig = Rig(Path(os.environ["RIG"]), args.rig_scripts.resolve(), args.python)
    (rig.rig / "run").mkdir(exist_ok=True)

    def leave(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    # Python's default for SIGTERM ends the process without ``finally``: the extender started would then keep the
    # port, and the next run would measure it instead of its own (CPU 0.0).
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, leave)
    try:
        for rotation in range(1, args.rotations + 1):
            for mode in modes if rotation % 2 else modes[::-1]:
                print(json.dumps(run_mode(rig, args, mode, rotation)), flush=True)
    finally:
        rig.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
