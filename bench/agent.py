"""Bench of the node agent: 100 pod cgroups with processes, the agent at a 1 s interval for 60 s.

Creates a throw-away kubepods subtree (real cgroup v1, needs root), 100 pods (half BE, half LS) each with
a sleeping process in a container dir, cluster files binding them to the node, and runs ``koord agent``
as a subprocess in the embedded mode (NodeMetric written every 10 s). Prints JSON: the agent's own cpu
in percent of one core (user + system time of the agent's process over wall time, after a 5 s warm-up,
so other load on the machine does not count) and its peak RSS sampled every second. ``koord agent``
re-executes into ``python -m agent`` under the same pid, so this measures the deployed command.
Targets: <= 2 % and <= 80 MB.

    python bench/agent.py [--pods 100] [--seconds 60] [--interval 1] [--feature-gates CPUBurst=false] [--all-dimensions]

``--all-dimensions`` turns every differentiated-SLO dimension on: memory QoS, resctrl (gate RdtResctrl; acts only
where resctrl is mounted), disk IO (gate BlkIOReconcile; blkio dirs made for the BE pods, a 100 MB/s read limit
on the first real disk), system memory (gate SystemConfig: watermark_scale_factor set to the value the host has,
min_free_kbytes factor 1, which the executor refuses, so the host is not changed) and network (HTB on a veth in a
network namespace the bench makes, every pod with an address).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.agent.cgtree import SLEEP, CgroupTree, writable_reason  # noqa: E402

NODE = "bench-node"


def first_disk() -> str | None:
    """The first real disk of the machine (``vda``, ``sda``, ``nvme0n1``), None when there is none."""
    for entry in sorted(Path("/sys/block").iterdir()):
        if not entry.name.startswith(("loop", "ram", "zram", "dm-", "sr")):
            return entry.name
    return None


def blkio_mkdir(tree: CgroupTree, rel: str) -> list[Path]:
    """Make ``rel`` and its missing parents in the blkio controller; returns the dirs it created, parents first
    (the caller removes them in reverse order)."""
    made: list[Path] = []
    parts = Path(rel).parts
    for i in range(1, len(parts) + 1):
        path = tree.root / "blkio" / Path(*parts[:i])
        if not path.is_dir():
            path.mkdir()
            made.append(path)
    return made


def all_dimensions_spec(spec: dict[str, object]) -> dict[str, object]:
    """``spec`` with every dimension's NodeSLO fields on (see the module docstring)."""
    wsf = int(Path("/proc/sys/vm/watermark_scale_factor").read_text())
    disk = first_disk()
    blocks = [{"name": disk, "type": "device", "ioCfg": {"readBPS": 100 * 2**20}}] if disk else []

    def cls(start: int, end: int, mba: int, egress: str) -> dict[str, object]:
        return {
            "memoryQOS": {"enable": True, "minLimitPercent": 10, "lowLimitPercent": 20, "throttlingPercent": 80},
            "resctrlQOS": {"enable": True, "catRangeStartPercent": start, "catRangeEndPercent": end, "mbaPercent": mba},
            "networkQOS": {"enable": True, "egressRequest": "10%", "egressLimit": egress},
        }

    be = {**cls(0, 30, 40, "20%"), "blkioQOS": {"enable": True, "blocks": blocks}}
    return {
        **spec,
        "resourceQOSStrategy": {
            "lsrClass": cls(0, 100, 100, "100%"),
            "lsClass": cls(0, 100, 100, "100%"),
            "beClass": be,
        },
        "systemStrategy": {"minFreeKbytesFactor": 1, "watermarkScaleFactor": wsf, "totalNetworkBandwidth": "1G"},
    }


def applied_dimensions(tree: CgroupTree, netns: str | None) -> dict[str, object]:
    """What the agent put in place: the besteffort read limit, the BE pods' memory.min count, the HTB classes."""
    be = tree.root / "blkio" / tree.kubepods / "besteffort" / "blkio.throttle.read_bps_device"
    out: dict[str, object] = {"besteffort_read_bps_device": be.read_text().strip() if be.exists() else None}
    try:
        from pyroute2 import NetNS

        with NetNS(netns) as ipr:
            idx = ipr.link_lookup(ifname="kb0")[0]
            out["htb_classes"] = len(ipr.get_classes(idx))
            out["u32_filters"] = sum(1 for f in ipr.get_filters(idx, parent=0x10000) if f["handle"] & 0xFFF)
    except Exception as exc:  # no netns, no pyroute2
        out["htb"] = f"unreadable: {exc}"
    return out


def main() -> None:
    """Run the bench and print the JSON result."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--feature-gates", default="", help="passed to koord agent, e.g. CPUBurst=false")
    ap.add_argument("--all-dimensions", action="store_true", help="every differentiated-SLO dimension on")
    args = ap.parse_args()
    reason = writable_reason()
    if reason:
        print(json.dumps({"skipped": reason}))
        return
    tree = CgroupTree()
    tmp = Path(tempfile.mkdtemp(prefix="koord-agent-bench-"))
    agent: subprocess.Popen[bytes] | None = None
    blkio_dirs: list[Path] = []
    netns = f"koord-bench-{uuid.uuid4().hex[:8]}" if args.all_dimensions else None
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
        extra: list[str] = []
        if args.all_dimensions:
            assert netns is not None
            objs[1]["spec"] = all_dimensions_spec(objs[1]["spec"])  # type: ignore[index]
            subprocess.run(["ip", "netns", "add", netns], check=True)
            subprocess.run(["ip", "-n", netns, "link", "add", "kb0", "type", "veth", "peer", "name", "kb1"], check=True)
            extra = ["--net-interface", "kb0", "--net-netns", netns]
            gates = "BlkIOReconcile=true,SystemConfig=true,RdtResctrl=true,NetQOSByTC=true"
            args.feature_gates = f"{args.feature_gates},{gates}" if args.feature_gates else gates
        for i in range(args.pods):
            be = i % 2 == 0
            uid = f"bench-{i:04d}"
            rel = tree.pod(uid, "besteffort" if be else "burstable", (f"c{i:04d}",))
            tree.start(f"{rel}/c{i:04d}", SLEEP)
            if args.all_dimensions and be:
                for d in (rel, f"{rel}/c{i:04d}"):
                    blkio_dirs += blkio_mkdir(tree, d)
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
                        "podIP": f"10.77.{i // 250}.{i % 250 + 1}",
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
            *extra,
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
        applied = applied_dimensions(tree, netns) if args.all_dimensions else {}
        print(
            json.dumps(
                {
                    "pods": args.pods,
                    "feature_gates": args.feature_gates,
                    "all_dimensions": args.all_dimensions,
                    "interval_seconds": args.interval,
                    "seconds": round(wall, 1),
                    "agent_cpu_percent_of_one_core": round(cpu, 3),
                    "agent_peak_rss_mb": round(peak / 2**20, 1),
                    "nodemetric_written": reported,
                    "applied": applied,
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
        for d in reversed(blkio_dirs):
            with contextlib.suppress(OSError):
                d.rmdir()
        tree.cleanup()
        if netns is not None:
            subprocess.run(["ip", "netns", "del", netns], check=False, capture_output=True)


if __name__ == "__main__":
    main()
