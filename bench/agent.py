"""Bench of the node agent: 100 pod cgroups with processes, the agent at a 1 s interval for 60 s.

Creates a throw-away kubepods subtree (real cgroup v1, needs root), 100 pods (half BE, half LS) each with
a sleeping process in a container dir, cluster files binding them to the node, and runs ``koord agent``
as a subprocess in the embedded mode (NodeMetric written every 10 s). Prints JSON: the agent's own cpu
in percent of one core (user + system time of the agent's process over wall time, after a 5 s warm-up,
so other load on the machine does not count) and its peak RSS sampled every second. ``koord agent``
re-executes into ``python -m agent`` under the same pid, so this measures the deployed command.
Targets: <= 2 % and <= 80 MB.

    python bench/agent.py [--pods 100] [--seconds 60] [--interval 1] [--feature-gates CPUBurst=false]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.agent.cgtree import SLEEP, CgroupTree, writable_reason  # noqa: E402

NODE = "bench-node"


def main() -> None:
    """Run the bench and print the JSON result."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--feature-gates", default="", help="passed to koord agent, e.g. CPUBurst=false")
    args = ap.parse_args()
    reason = writable_reason()
    if reason:
        print(json.dumps({"skipped": reason}))
        return
    tree = CgroupTree()
    tmp = Path(tempfile.mkdtemp(prefix="koord-agent-bench-"))
    agent: subprocess.Popen[bytes] | None = None
    try:
        objs: list[dict[str, object]] = [
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}},
            {
                "apiVersion": "slo.koordinator.sh/v1alpha1",
                "kind": "NodeSLO",
                "metadata": {"name": NODE},
                "spec": {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}},
            },
        ]
        for i in range(args.pods):
            be = i % 2 == 0
            uid = f"bench-{i:04d}"
            rel = tree.pod(uid, "besteffort" if be else "burstable", (f"c{i:04d}",))
            tree.start(f"{rel}/c{i:04d}", SLEEP)
            res = (
                {"requests": {"kubernetes.io/batch-cpu": "500"}, "limits": {"kubernetes.io/batch-cpu": "1000"}}
                if be
                else {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}
            )
            objs.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"pod-{i}",
                        "namespace": "bench",
                        "uid": uid,
                        "labels": {"koordinator.sh/qosClass": "BE" if be else "LS"},
                    },
                    "spec": {"nodeName": NODE, "containers": [{"name": "main", "resources": res}]},
                    "status": {
                        "phase": "Running",
                        "qosClass": "BestEffort" if be else "Burstable",
                        "containerStatuses": [{"name": "main", "containerID": f"containerd://c{i:04d}"}],
                    },
                }
            )
        cluster = tmp / "cluster"
        cluster.mkdir()
        (cluster / "objects.yaml").write_text(yaml.safe_dump_all(objs))
        cmd = [
            str(Path(sys.executable).with_name("koord")),
            "agent",
            "--node-name", NODE,
            "--kubepods", tree.kubepods,
            "--cluster", str(cluster),
            "--nodemetric-dir", str(tmp / "metrics"),
            "--interval", str(args.interval),
            "--report-interval", "10",
            "--port", "0",
            "--log-level", "warning",
        ]  # fmt: skip
        if args.feature_gates:
            cmd += ["--feature-gates", args.feature_gates]
        agent = subprocess.Popen(cmd, stderr=subprocess.PIPE)
        proc = psutil.Process(agent.pid)
        time.sleep(5.0)
        t0 = proc.cpu_times()
        w0 = time.monotonic()
        peak = proc.memory_info().rss
        while time.monotonic() - w0 < args.seconds:
            time.sleep(1.0)
            peak = max(peak, proc.memory_info().rss)
        t1 = proc.cpu_times()
        wall = time.monotonic() - w0
        cpu = (t1.user + t1.system - t0.user - t0.system) / wall * 100
        reported = (tmp / "metrics" / f"nodemetric-{NODE}.yaml").exists()
        print(
            json.dumps(
                {
                    "pods": args.pods,
                    "feature_gates": args.feature_gates,
                    "interval_seconds": args.interval,
                    "seconds": round(wall, 1),
                    "agent_cpu_percent_of_one_core": round(cpu, 3),
                    "agent_peak_rss_mb": round(peak / 2**20, 1),
                    "nodemetric_written": reported,
                    "targets": {"cpu_percent": 2.0, "rss_mb": 80.0},
                }
            )
        )
    finally:
        if agent is not None:
            agent.terminate()
            try:
                agent.wait(timeout=10)
            except subprocess.TimeoutExpired:
                agent.kill()
        tree.cleanup()


if __name__ == "__main__":
    main()
