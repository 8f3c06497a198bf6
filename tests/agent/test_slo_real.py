"""Differentiated SLO on the real kernel (root): disk IO through blkio throttling of a loop device, network
bandwidth through HTB on a veth pair between two network namespaces, and resctrl where the machine has it.

Everything is made by the test with unique names (uuid) and removed in ``finally``: the loop device (the
kernel picks a free one), the cgroup dirs, the namespaces. Throughput tests are ``serial``: a machine busy
with other tests measures less. Only addresses inside the test's own namespaces are used.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from agent.cgroups import CgroupLayout
from agent.daemon import Agent, AgentConfig
from agent.evictor import RecordingEvictor
from agent.qos.netqos import NetQoS
from agent.qos.netqos import plan as net_plan
from agent.qos.resctrl import detect
from agent.states.nodeslo import validated_spec
from agent.states.pods import pod_meta
from agent.states.providers import FileStates

NODE = "real-slo-node"
MiB = 1 << 20
CGROOT = Path("/sys/fs/cgroup")

READER = r"""
import mmap, os, sys, time
dev, seconds = sys.argv[1], float(sys.argv[2])
sys.stdin.readline()
fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
size = os.lseek(fd, 0, os.SEEK_END)
buf = mmap.mmap(-1, 65536)
n = off = 0
t0 = time.monotonic()
while time.monotonic() - t0 < seconds:
    got = os.preadv(fd, [buf], off)
    n += got
    off = (off + got) % size
print(n, time.monotonic() - t0, flush=True)
"""


def _blkio_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    if not (CGROOT / "blkio" / "blkio.throttle.read_bps_device").exists():
        return "no cgroup v1 blkio controller with throttling at /sys/fs/cgroup/blkio"
    if shutil.which("losetup") is None:
        return "no losetup to make a loop device"
    return None


def _pod(uid: str, qos: str, kube_qos: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": uid, "namespace": "d", "uid": uid, "labels": {"koordinator.sh/qosClass": qos}},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "resources": {}}]},
        "status": {"phase": "Running", "qosClass": kube_qos},
    }


def _objects(path: Path, spec: dict[str, Any], pods: list[dict[str, Any]]) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}
    slo = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": NODE}, "spec": spec}
    (path / "objects.json").write_text(json.dumps({"kind": "List", "items": [node, slo, *pods]}))


def _read_rate(dev: str, cgroup_dir: Path, seconds: float) -> float:
    """Bytes/s of O_DIRECT reads of ``dev`` for ``seconds`` by a process placed in ``cgroup_dir`` (blkio)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", READER, dev, str(seconds)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        (cgroup_dir / "cgroup.procs").write_text(str(proc.pid))
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        out, _ = proc.communicate(timeout=seconds + 10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    n, elapsed = out.split()
    return int(n) / float(elapsed)


@pytest.mark.serial
def test_disk_io_of_be_is_throttled_and_released(tmp_path: Path) -> None:
    reason = _blkio_reason()
    if reason:
        pytest.skip(reason)
    backing = tmp_path / "disk.img"
    with open(backing, "wb") as f:
        f.truncate(64 * MiB)
    try:
        dev = subprocess.run(
            ["losetup", "--find", "--show", str(backing)], check=True, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot make a loop device: {exc}")
    kubepods = f"kubepods-test-{uuid.uuid4().hex[:10]}"
    uid = uuid.uuid4().hex[:12]
    dirs = [kubepods, f"{kubepods}/besteffort", f"{kubepods}/besteffort/pod{uid}"]
    try:
        for rel in dirs:
            (CGROOT / "blkio" / rel).mkdir()
        cluster = tmp_path / "cluster"
        cluster.mkdir()
        blocks = [{"name": dev, "type": "device", "ioCfg": {"readBPS": MiB}}]
        limited = {"resourceQOSStrategy": {"beClass": {"blkioQOS": {"enable": True, "blocks": blocks}}}}
        _objects(cluster, limited, [_pod(uid, "BE", "BestEffort")])
        config = AgentConfig(node_name=NODE, states_interval=0, features={"BlkIOReconcile"})
        agent = Agent(
            config, CgroupLayout.detect(CGROOT, kubepods), FileStates(NODE, cluster), None, RecordingEvictor(NODE, None)
        )
        agent.tick(1000.0)
        number = Path(f"/sys/class/block/{Path(dev).name}/dev").read_text().strip()
        be_dir = CGROOT / "blkio" / kubepods / "besteffort"
        assert (be_dir / "blkio.throttle.read_bps_device").read_text().strip() == f"{number} {MiB}"
        rate = _read_rate(dev, be_dir / f"pod{uid}", 2.5)
        print(f"blkio: BE read {rate / MiB:.3f} MiB/s with readBPS 1 MiB/s")
        assert 0.8 * MiB <= rate <= 1.2 * MiB, f"throttled read {rate / MiB:.2f} MiB/s, limit 1 MiB/s"

        _objects(
            cluster,
            {"resourceQOSStrategy": {"beClass": {"blkioQOS": {"enable": False}}}},
            [_pod(uid, "BE", "BestEffort")],
        )
        agent.tick(1001.0)
        assert (be_dir / "blkio.throttle.read_bps_device").read_text().strip() == ""
        free = _read_rate(dev, be_dir / f"pod{uid}", 0.5)
        print(f"blkio: unthrottled read {free / MiB:.1f} MiB/s")
        assert free > 5 * MiB, f"unthrottled read only {free / MiB:.2f} MiB/s"
    finally:
        for rel in reversed(dirs):
            with contextlib.suppress(OSError):
                (CGROOT / "blkio" / rel).rmdir()
        subprocess.run(["losetup", "-d", dev], check=False, timeout=10)


SINK = r"""
import socket, sys, time
s = socket.socket()
s.bind((sys.argv[1], 0))
s.listen(4)
print(s.getsockname()[1], flush=True)
for _ in range(int(sys.argv[2])):
    c, _ = s.accept()
    marks = []
    n = 0
    t0 = time.monotonic()
    while True:
        data = c.recv(1 << 16)
        if not data:
            break
        n += len(data)
        marks.append((time.monotonic() - t0, n))
    c.close()
    # the rate after the first 0.5 s (HTB's burst and TCP's slow start excluded)
    start = next(((t, b) for t, b in marks if t >= 0.5), marks[0])
    end = marks[-1]
    print((end[1] - start[1]) / max(end[0] - start[0], 1e-6), flush=True)
"""

SOURCE = r"""
import socket, sys, time
src, dst, port, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
s = socket.create_connection((dst, port), timeout=10, source_address=(src, 0))
buf = b"x" * 65536
t0 = time.monotonic()
while time.monotonic() - t0 < seconds:
    s.sendall(buf)
s.close()
"""


def _net_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    if shutil.which("ip") is None:
        return "no ip(8) to make the test's namespaces"
    try:
        import pyroute2  # noqa: F401
    except ImportError:
        return "pyroute2 is not installed"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@pytest.mark.serial
def test_network_of_be_is_limited_both_ways_and_ls_is_not() -> None:
    reason = _net_reason()
    if reason:
        pytest.skip(reason)
    tag = uuid.uuid4().hex[:8]
    ns_a, ns_b = f"koord-a-{tag}", f"koord-b-{tag}"
    veth_a, veth_b = f"kq{tag}a", f"kq{tag}b"
    net = f"10.{int(tag[:2], 16)}.{int(tag[2:4], 16)}"
    sink_ip, ls_ip, be_ip = f"{net}.1", f"{net}.2", f"{net}.3"
    created: list[str] = []
    sink: subprocess.Popen[str] | None = None
    shaper: NetQoS | None = None
    try:
        for ns in (ns_a, ns_b):
            _ip("netns", "add", ns)
            created.append(ns)
        _ip("-n", ns_a, "link", "add", veth_a, "type", "veth", "peer", "name", veth_b, "netns", ns_b)
        _ip("-n", ns_a, "addr", "add", f"{ls_ip}/24", "dev", veth_a)
        _ip("-n", ns_a, "addr", "add", f"{be_ip}/24", "dev", veth_a)
        _ip("-n", ns_b, "addr", "add", f"{sink_ip}/24", "dev", veth_b)
        for ns, link in ((ns_a, veth_a), (ns_b, veth_b), (ns_a, "lo"), (ns_b, "lo")):
            _ip("-n", ns, "link", "set", link, "up")
        spec = validated_spec(
            {
                "spec": {
                    "systemStrategy": {"totalNetworkBandwidth": "1G"},
                    "resourceQOSStrategy": {
                        "lsClass": {"networkQOS": {"enable": True, "egressRequest": "50%", "egressLimit": "100%"}},
                        "beClass": {
                            "networkQOS": {
                                "enable": True,
                                "egressRequest": "1M",
                                "egressLimit": "8M",
                                "ingressLimit": "16M",
                            }
                        },
                    },
                }
            }
        )
        pods = [
            pod_meta({**_pod("ls-pod", "LS", "Burstable"), "status": {"podIP": ls_ip, "qosClass": "Burstable"}}, None),
            pod_meta(
                {**_pod("be-pod", "BE", "BestEffort"), "status": {"podIP": be_ip, "qosClass": "BestEffort"}}, None
            ),
        ]
        shaper = NetQoS(veth_a, ns_a)
        assert shaper.supported() == (True, "")
        wanted = net_plan(spec, pods)
        assert shaper.apply(wanted)
        assert not shaper.apply(wanted), "an unchanged plan sends nothing"
        assert shaper.present()
        sink = subprocess.Popen(
            ["ip", "netns", "exec", ns_b, sys.executable, "-c", SINK, sink_ip, "2"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert sink.stdout is not None
        port = sink.stdout.readline().strip()

        def send(src: str, seconds: float) -> float:
            subprocess.run(
                ["ip", "netns", "exec", ns_a, sys.executable, "-c", SOURCE, src, sink_ip, port, str(seconds)],
                check=True,
                timeout=seconds + 20,
            )
            assert sink is not None and sink.stdout is not None
            return float(sink.stdout.readline())

        limit = 8_000_000 / 8  # bytes/s
        be_rate = send(be_ip, 1.5)
        print(f"net: BE egress {be_rate * 8 / 1e6:.3f} Mbit/s with egressLimit 8M")
        assert 0.8 * limit <= be_rate <= 1.2 * limit, f"BE egress {be_rate * 8 / 1e6:.2f} Mbit/s, limit 8"
        ls_rate = send(ls_ip, 0.7)
        print(f"net: LS egress {ls_rate * 8 / 1e6:.1f} Mbit/s")
        assert ls_rate > 4 * limit, f"LS egress {ls_rate * 8 / 1e6:.2f} Mbit/s should not be held to BE's limit"

        # ingress: traffic to the BE address is redirected to the ifb and held to its ingressLimit
        sink.wait(timeout=10)
        sink = subprocess.Popen(
            ["ip", "netns", "exec", ns_a, sys.executable, "-c", SINK, be_ip, "1"], stdout=subprocess.PIPE, text=True
        )
        assert sink.stdout is not None
        port = sink.stdout.readline().strip()
        subprocess.run(
            ["ip", "netns", "exec", ns_b, sys.executable, "-c", SOURCE, sink_ip, be_ip, port, "1.5"],
            check=True,
            timeout=30,
        )
        be_in = float(sink.stdout.readline())
        print(f"net: BE ingress {be_in * 8 / 1e6:.3f} Mbit/s with ingressLimit 16M")
        assert 0.8 * 2 * limit <= be_in <= 1.2 * 2 * limit, f"BE ingress {be_in * 8 / 1e6:.2f} Mbit/s, limit 16"
    finally:
        if shaper is not None:
            shaper.close()
        if sink is not None and sink.poll() is None:
            sink.kill()
            sink.wait()
        for ns in created:
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True, timeout=10)


def test_resctrl_where_the_machine_has_it(tmp_path: Path) -> None:
    info, why = detect(Path("/sys/fs/resctrl"), Path("/proc"))
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    _objects(cluster, {}, [])
    config = AgentConfig(node_name=NODE, states_interval=0, features={"RdtResctrl"})
    agent = Agent(
        config,
        CgroupLayout.detect(tmp_path / "cg", "kubepods"),
        FileStates(NODE, cluster),
        None,
        RecordingEvictor(NODE, None),
    )
    dims = {d.name: d for d in agent.dimensions()}
    if info is None:
        assert not dims["LLC/MBA (resctrl)"].supported
        assert dims["LLC/MBA (resctrl)"].detail == why and why
        pytest.skip(f"no resctrl on this machine: {why}")
    if os.geteuid() != 0:
        pytest.skip("needs root to create resctrl groups")
    agent.tick(1000.0)
    for group in ("LSR", "LS", "BE"):
        assert (Path("/sys/fs/resctrl") / group / "schemata").exists()
