"""Differentiated SLO on fake trees built from real layouts: resctrl (11-way L3 ``cbm_mask 7ff``, two cache ids,
MBA granularity 10), v1 blkio and v2 io trees, Anolis memory files and the memory sysctls.

Each test builds the files the kernel offers under ``tmp_path``, runs the agent (or its planners and the
executor) and checks the files and values per class, and that an invalid NodeSLO writes nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agent.cgroups import CgroupLayout
from agent.daemon import Agent, AgentConfig
from agent.evictor import RecordingEvictor
from agent.executor import CgroupExecutor
from agent.hostfiles import HostRoots, HostWrite
from agent.qos.netqos import plan as net_plan
from agent.qos.resctrl import ResctrlInfo, detect, l3_mask, mb_value
from agent.states.nodeslo import InvalidNodeSLO, validated_spec
from agent.states.pods import pod_meta
from agent.states.providers import FileStates

NODE = "n1"
GiB = 1 << 30
CPUINFO = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu sse cat_l3 cdp_l3 mba cqm\n\n"
ROOT_SCHEMATA = "    L3:0=7ff;1=7ff\n    MB:0=100;1=100\n"
ANOLIS = {
    "memory.wmark_ratio": "0",
    "memory.wmark_scale_factor": "50",
    "memory.wmark_min_adj": "0",
    "memory.priority": "0",
    "memory.use_priority_oom": "0",
    "memory.oom.group": "0",
}
THROTTLES = (
    "blkio.throttle.read_bps_device",
    "blkio.throttle.write_bps_device",
    "blkio.throttle.read_iops_device",
    "blkio.throttle.write_iops_device",
)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def resctrl_tree(root: Path, proc: Path) -> None:
    """A mounted resctrl as on a 2-socket Intel server: 11-way L3 per socket, MBA in steps of 10 %."""
    write(root / "info" / "L3" / "cbm_mask", "7ff\n")
    write(root / "info" / "L3" / "min_cbm_bits", "1\n")
    write(root / "info" / "L3" / "num_closids", "16\n")
    write(root / "info" / "MB" / "bandwidth_gran", "10\n")
    write(root / "info" / "MB" / "min_bandwidth", "10\n")
    write(root / "schemata", ROOT_SCHEMATA)
    write(root / "tasks", "1\n")
    for group in ("LSR", "LS", "BE"):  # the kernel fills a new group's files; the fake has them ready
        write(root / group / "schemata", ROOT_SCHEMATA)
        write(root / group / "tasks", "")
    write(proc / "cpuinfo", CPUINFO)


def sys_tree(sys_root: Path) -> None:
    """/sys/class/block with a disk vdb (253:16) and its partition vdb1 (253:17), as the kernel links them."""
    disk = sys_root / "devices" / "virtual" / "block" / "vdb"
    write(disk / "dev", "253:16\n")
    write(disk / "vdb1" / "dev", "253:17\n")
    write(disk / "vdb1" / "partition", "1\n")
    (sys_root / "class" / "block").mkdir(parents=True)
    os.symlink(disk, sys_root / "class" / "block" / "vdb")
    os.symlink(disk / "vdb1", sys_root / "class" / "block" / "vdb1")


def v1_tree(root: Path, pods: list[tuple[str, str, str]]) -> CgroupLayout:
    """cgroup v1 controllers with kubepods, the QoS dirs, pod and container dirs (Anolis memory files, blkio)."""
    qos_dirs = ["kubepods", "kubepods/burstable", "kubepods/besteffort"]
    sub = {"Guaranteed": "", "Burstable": "burstable/", "BestEffort": "besteffort/"}
    pod_dirs = [f"kubepods/{sub[kq]}pod{uid}" for uid, _, kq in pods]
    for rel in qos_dirs + pod_dirs + [f"{d}/c{d[-3:]}" for d in pod_dirs]:
        for name in ("cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us"):
            write(root / "cpu" / rel / name, "-1" if "quota" in name else "100000" if "period" in name else "1024")
        write(root / "cpu" / rel / "tasks", "")
        for name, value in ANOLIS.items():
            write(root / "memory" / rel / name, value)
        write(root / "memory" / rel / "memory.limit_in_bytes", "9223372036854771712")
        for name in THROTTLES:
            write(root / "blkio" / rel / name, "")
        write(root / "blkio" / rel / "blkio.cost.weight", "")
    return CgroupLayout.detect(root, "kubepods")


def pod(uid: str, qos: str, kube_qos: str, ip: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": uid, "namespace": "d", "uid": uid, "labels": {"koordinator.sh/qosClass": qos}},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "resources": {}}]},
        "status": {
            "phase": "Running",
            "qosClass": kube_qos,
            "podIP": ip,
            "containerStatuses": [{"name": "c", "containerID": f"containerd://c{uid[-3:]}"}],
        },
    }


def node_slo(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": NODE}, "spec": spec}


SLO_SPEC: dict[str, Any] = {
    "resourceQOSStrategy": {
        "lsrClass": {
            "resctrlQOS": {"enable": True, "catRangeStartPercent": 0, "catRangeEndPercent": 100, "mbaPercent": 100},
            "memoryQOS": {"enable": True, "priorityEnable": 1, "priority": 12, "wmarkMinAdj": -25},
        },
        "lsClass": {
            "resctrlQOS": {"enable": True, "catRangeStartPercent": 10, "catRangeEndPercent": 50, "mbaPercent": 80},
            "memoryQOS": {"enable": True, "wmarkRatio": 95, "wmarkScalePermill": 20, "wmarkMinAdj": -25},
        },
        "beClass": {
            "resctrlQOS": {"enable": True, "catRangeStartPercent": 0, "catRangeEndPercent": 30, "mbaPercent": 35},
            "memoryQOS": {"enable": True, "wmarkRatio": 90, "wmarkMinAdj": 50, "oomKillGroup": 1},
            "blkioQOS": {
                "enable": True,
                "blocks": [
                    {"name": "/dev/vdb1", "type": "device", "ioCfg": {"readBPS": 1048576, "writeIOPS": 200}},
                ],
            },
        },
    },
    "systemStrategy": {"minFreeKbytesFactor": 100, "watermarkScaleFactor": 150, "memcgReapBackGround": 1},
}
PODS = [("lsr-001", "LSR", "Guaranteed"), ("ls--002", "LS", "Burstable"), ("be--003", "BE", "BestEffort")]


class Env:
    """A fake node: cgroup v1 tree, resctrl, proc and sys, cluster files; the agent on it."""

    def __init__(self, tmp_path: Path, spec: dict[str, Any], *, dry_run: bool = False) -> None:
        self.tmp = tmp_path
        self.cg = tmp_path / "cgroup"
        self.resctrl = tmp_path / "resctrl"
        self.proc = tmp_path / "proc"
        self.sys = tmp_path / "sys"
        self.layout = v1_tree(self.cg, PODS)
        resctrl_tree(self.resctrl, self.proc)
        sys_tree(self.sys)
        write(self.proc / "sys" / "vm" / "min_free_kbytes", "67584\n")
        write(self.proc / "sys" / "vm" / "watermark_scale_factor", "10\n")
        write(self.sys / "kernel" / "mm" / "memcg_reaper" / "reap_background", "0\n")
        write(self.proc / "meminfo", f"MemTotal: {16 * GiB // 1024} kB\n")
        write(self.cg / "cpu" / "kubepods" / "besteffort" / "podbe--003" / "c003" / "tasks", "4242\n4243\n")
        write(self.cg / "cpu" / "kubepods" / "burstable" / "podls--002" / "c002" / "tasks", "5151\n")
        self.cluster = tmp_path / "cluster"
        self.cluster.mkdir()
        self.set_slo(spec)
        config = AgentConfig(
            node_name=NODE,
            states_interval=0,
            features={"RdtResctrl", "BlkIOReconcile", "SystemConfig"},
            dry_run=dry_run,
            proc=self.proc,
            sys_root=self.sys,
            resctrl_root=self.resctrl,
        )
        self.agent = Agent(config, self.layout, FileStates(NODE, self.cluster), None, RecordingEvictor(NODE, None))
        self.host_written: list[tuple[str, str]] = []
        original = self.agent.executor.update_host

        def recording(w: HostWrite, *, verify: bool = False) -> bool:
            changed = original(w, verify=verify)
            if changed:
                self.host_written.append((str(w.path.relative_to(tmp_path)), w.value))
            return changed

        self.agent.executor.update_host = recording  # type: ignore[method-assign]

    def set_slo(self, spec: dict[str, Any]) -> None:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": NODE},
            "status": {"capacity": {"cpu": "4", "memory": "16Gi"}, "allocatable": {"cpu": "4", "memory": "16Gi"}},
        }
        items = [node, node_slo(spec), *(pod(u, q, k) for u, q, k in PODS)]
        (self.cluster / "objects.json").write_text(json.dumps({"kind": "List", "items": items}))

    def read(self, *parts: str) -> str:
        return (self.cg.joinpath(*parts)).read_text().strip()

    def snapshot(self) -> dict[str, str]:
        return {
            str(p.relative_to(self.tmp)): p.read_text()
            for base in (self.cg, self.resctrl, self.proc / "sys", self.sys / "kernel")
            for p in base.rglob("*")
            if p.is_file()
        }


def test_l3_mask_and_mb_follow_upstream() -> None:
    assert l3_mask(0x7FF, 0, 30) == 0xF
    assert l3_mask(0x7FF, 10, 50) == 0x3C
    assert l3_mask(0x7FF, 0, 100) == 0x7FF
    assert l3_mask(0x3FF, 10, 80) == 0xFE
    assert l3_mask(0x7FF, 0, 5, min_bits=2) == 0x3, "widened to min_cbm_bits"
    with pytest.raises(ValueError, match="illegal cbm"):
        l3_mask(0x7F0, 0, 50)
    with pytest.raises(ValueError, match="illegal l3 cat percent"):
        l3_mask(0x7FF, 50, 50)
    info = ResctrlInfo(Path("/x"), True, True, 0x7FF, 1, (0, 1), 10, 10, (0, 1))
    assert [mb_value(p, info) for p in (1, 35, 80, 100)] == ["10", "40", "80", "100"]
    amd = ResctrlInfo(Path("/x"), True, True, 0xFFFF, 1, (0,), 1, 1, (0,), amd=True)
    assert [mb_value(p, amd) for p in (50, 100)] == ["80", "2048"]


def test_resctrl_detection_says_why_not(tmp_path: Path) -> None:
    write(tmp_path / "proc" / "cpuinfo", "processor\t: 0\nflags\t\t: fpu sse\n")
    info, why = detect(tmp_path / "resctrl", tmp_path / "proc")
    assert info is None
    assert "not mounted" in why and "cat_l3 and mba" in why
    resctrl_tree(tmp_path / "resctrl", tmp_path / "proc")
    info, why = detect(tmp_path / "resctrl", tmp_path / "proc")
    assert info is not None and why == ""
    assert (info.cbm_mask, info.l3_ids, info.mb_gran, info.mb_ids) == (0x7FF, (0, 1), 10, (0, 1))


def test_every_dimension_per_class_on_a_v1_node(tmp_path: Path) -> None:
    env = Env(tmp_path, SLO_SPEC)
    env.agent.tick(1000.0)
    written = env.host_written
    # resctrl: schemata per group, L3 per cache id, MB rounded up to the granularity
    assert ("resctrl/LSR/schemata", "L3:0=7ff;1=7ff") not in written, "already in place: not written"
    assert ("resctrl/LS/schemata", "L3:0=3c;1=3c") in written
    assert ("resctrl/LS/schemata", "MB:0=80;1=80") in written
    assert ("resctrl/BE/schemata", "L3:0=f;1=f") in written
    assert ("resctrl/BE/schemata", "MB:0=40;1=40") in written
    # resctrl: each pod's threads in its class's group
    assert ("resctrl/BE/tasks", "4242") in written and ("resctrl/BE/tasks", "4243") in written
    assert ("resctrl/LS/tasks", "5151") in written
    # blkio: beClass on the besteffort dir, the partition resolved to its disk 253:16
    assert env.read("blkio", "kubepods", "besteffort", "blkio.throttle.read_bps_device") == "253:16 1048576"
    assert env.read("blkio", "kubepods", "besteffort", "blkio.throttle.write_iops_device") == "253:16 200"
    assert env.read("blkio", "kubepods", "besteffort", "blkio.cost.weight") == "253:16 100"
    assert env.read("blkio", "kubepods", "burstable", "blkio.throttle.read_bps_device") == ""
    # v1's blk-throttle is flat: the BE pod and its container dirs, where the tasks are, get the values too
    be_blkio = ("blkio", "kubepods", "besteffort", "podbe--003")
    assert env.read(*be_blkio, "blkio.throttle.read_bps_device") == "253:16 1048576"
    assert env.read(*be_blkio, "c003", "blkio.throttle.read_bps_device") == "253:16 1048576"
    # Anolis memory QoS per class on pods and containers, priority / oom group on the QoS dirs
    be_pod = ("memory", "kubepods", "besteffort", "podbe--003")
    assert env.read(*be_pod, "memory.wmark_ratio") == "90"
    assert env.read(*be_pod, "memory.wmark_min_adj") == "50"
    assert env.read(*be_pod, "c003", "memory.oom.group") == "1"
    assert env.read("memory", "kubepods", "burstable", "podls--002", "memory.wmark_min_adj") == "-25"
    assert env.read("memory", "kubepods", "podlsr-001", "memory.priority") == "12"
    assert env.read("memory", "kubepods", "memory.use_priority_oom") == "1"
    assert env.read("memory", "kubepods", "besteffort", "memory.oom.group") == "1"
    # systemStrategy: 16 GiB x 100 / 10000 KiB
    assert (env.proc / "sys" / "vm" / "min_free_kbytes").read_text() == str(16 * GiB // 1024 * 100 // 10000)
    assert (env.proc / "sys" / "vm" / "watermark_scale_factor").read_text() == "150"
    assert (env.sys / "kernel" / "mm" / "memcg_reaper" / "reap_background").read_text() == "1"

    # the class disabled: blkio reset (0 = no limit), memory back to NoneMemoryQOS, resctrl back to the full cache
    spec = json.loads(json.dumps(SLO_SPEC))
    spec["resourceQOSStrategy"]["beClass"] = {"blkioQOS": {"enable": False}, "memoryQOS": {"enable": False}}
    env.set_slo(spec)
    env.host_written.clear()
    env.agent.tick(1001.0)
    assert env.read("blkio", "kubepods", "besteffort", "blkio.throttle.read_bps_device") == "253:16 0"
    assert env.read(*be_pod, "memory.wmark_ratio") == "0"
    assert env.read(*be_pod, "memory.wmark_scale_factor") == "50"
    assert ("resctrl/BE/schemata", "L3:0=7ff;1=7ff") in env.host_written


@pytest.mark.parametrize(
    ("path", "value", "problem"),
    [
        ("beClass.resctrlQOS", {"enable": True, "catRangeStartPercent": 50, "catRangeEndPercent": 40}, "catRange"),
        ("beClass.resctrlQOS", {"enable": True, "mbaPercent": 120}, "mbaPercent"),
        ("beClass.memoryQOS", {"enable": True, "wmarkMinAdj": 51}, "wmarkMinAdj"),
        (
            "beClass.blkioQOS",
            {"enable": True, "blocks": [{"name": "vdb", "type": "device", "ioCfg": {"readBPS": -1}}]},
            "readBPS",
        ),
        ("beClass.blkioQOS", {"enable": True, "blocks": [{"name": "vdb", "type": "disk"}]}, "type"),
        ("beClass.networkQOS", {"enable": True, "egressLimit": "150%"}, "egressLimit"),
    ],
)
def test_an_invalid_nodeslo_is_refused_and_nothing_is_written(
    tmp_path: Path, path: str, value: dict[str, Any], problem: str
) -> None:
    spec = json.loads(json.dumps(SLO_SPEC))
    cls, field = path.split(".")
    spec["resourceQOSStrategy"][cls][field] = value
    spec["systemStrategy"] = {}
    with pytest.raises(InvalidNodeSLO, match=problem):
        validated_spec(node_slo(spec))
    env = Env(tmp_path, spec)
    before = env.snapshot()
    env.agent.tick(1000.0)
    assert env.agent.slo_intake.refused
    after = env.snapshot()
    # pods' threads join their groups and BE pods get their batch cpu.shares whatever the NodeSLO says
    changed = {k for k in after if after[k] != before.get(k) and not k.endswith(("/tasks", "/cpu.shares"))}
    # the defaults stay in force: every class disabled, whose values are already in place; only the system
    # defaults (min_free_kbytes 1 % of memory, watermark_scale_factor 150) are written
    assert changed == {"proc/sys/vm/min_free_kbytes", "proc/sys/vm/watermark_scale_factor"}, changed


def test_host_writes_are_validated_and_dry_run_changes_nothing(tmp_path: Path) -> None:
    roots = HostRoots(tmp_path / "proc", tmp_path / "sys", tmp_path / "resctrl")
    resctrl_tree(roots.resctrl, roots.proc)
    write(roots.vm_file("min_free_kbytes"), "67584\n")
    ex = CgroupExecutor(CgroupLayout(tmp_path / "cg"), host_roots=roots)
    assert not ex.update_host(HostWrite(roots.vm_file("min_free_kbytes"), "5"))  # below 10240 KiB
    assert not ex.update_host(HostWrite(roots.resctrl / "BE" / "schemata", "L3:0=xyz"))
    assert not ex.update_host(HostWrite(tmp_path / "etc" / "min_free_kbytes", "20000"))  # outside the roots
    assert not ex.update_host(HostWrite(roots.resctrl / "BE" / "schemata", "MB:0=4a"))
    assert roots.vm_file("min_free_kbytes").read_text() == "67584\n"
    assert (roots.resctrl / "BE" / "schemata").read_text() == ROOT_SCHEMATA
    assert ex.update_host(HostWrite(roots.resctrl / "BE" / "schemata", "L3:1=00f;0=f"))
    assert (roots.resctrl / "BE" / "schemata").read_text() == "L3:0=f;1=f\n"
    dry = CgroupExecutor(CgroupLayout(tmp_path / "cg"), host_roots=roots, dry_run=True)
    assert dry.update_host(HostWrite(roots.vm_file("min_free_kbytes"), "20000"))
    assert dry.make_group_dir(roots.resctrl / "NEW")
    assert not (roots.resctrl / "NEW").exists() and roots.vm_file("min_free_kbytes").read_text() == "67584\n"
    assert not ex.make_group_dir(roots.resctrl / "info")


def test_blkio_on_a_v2_io_tree(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    write(root / "cgroup.controllers", "cpu io memory\n")
    for rel in ("kubepods", "kubepods/besteffort"):
        write(root / rel / "io.max", "")
        write(root / rel / "io.weight", "default 100\n")
        write(root / rel / "cpu.weight", "100")
    sys_tree(tmp_path / "sys")
    layout = CgroupLayout.detect(root, "kubepods")
    from agent.qos.blkio import BlkioPlanner

    spec = validated_spec(node_slo(SLO_SPEC))
    writes = BlkioPlanner(tmp_path / "sys").plan(layout, spec)
    ex = CgroupExecutor(layout)
    changed = ex.update_batch(writes)
    be = root / "kubepods" / "besteffort"
    # zero limits are already "max" (no line): only rbps and wiops and the weight are written
    assert changed == 3
    assert (be / "io.weight").read_text() == "253:16 100"
    assert (be / "io.max").read_text() in ("253:16 wiops=200", "253:16 rbps=1048576")
    (be / "io.max").write_text("253:16 rbps=1048576 wbps=max riops=max wiops=200\n")
    assert ex.update_batch(writes, verify=True) == 0, "io.max as the kernel prints it reads as in place"
    (be / "io.max").write_text("253:16 rbps=2097152 wbps=max riops=max wiops=200\n")
    # the fake file keeps only the last line written (the kernel merges keys): rbps, then wiops again
    assert ex.update_batch(writes, verify=True) == 2
    assert (be / "io.max").read_text() == "253:16 wiops=200"


def test_network_plan_classes_and_filters() -> None:
    spec = validated_spec(
        node_slo(
            {
                "systemStrategy": {"totalNetworkBandwidth": "100M"},
                "resourceQOSStrategy": {
                    "lsClass": {"networkQOS": {"enable": True, "egressRequest": "50%", "egressLimit": "100%"}},
                    "beClass": {
                        "networkQOS": {
                            "enable": True,
                            "egressRequest": "10M",
                            "egressLimit": "20%",
                            "ingressLimit": "5M",
                        }
                    },
                },
            }
        )
    )
    pods = [
        pod_meta(pod("ls--001", "LS", "Burstable", "10.0.0.2"), None),
        pod_meta(pod("be--002", "BE", "BestEffort", "10.0.0.3"), None),
    ]
    plan = net_plan(spec, pods)
    assert plan is not None and plan.total == 100_000_000
    by_minor = {c.minor: (c.rate, c.ceil) for c in plan.classes}
    assert by_minor[3] == (50_000_000, 100_000_000), "mid: LS"
    assert by_minor[4] == (10_000_000, 20_000_000), "low: BE"
    assert by_minor[2] == (40_000_000, 100_000_000), "high: what LS and BE do not request"
    assert [c.prio for c in plan.classes] == [0, 1, 2]
    assert plan.filters == (("10.0.0.2", 3), ("10.0.0.3", 4))
    ingress = {c.minor: (c.rate, c.ceil) for c in plan.ingress}
    assert ingress[4] == (1000, 5_000_000) and ingress[3] == (1000, 100_000_000), "ingress from the ingress fields"
    no_ingress = json.loads(json.dumps(spec.model_dump(by_alias=True, exclude_none=True)))
    no_ingress["resourceQOSStrategy"]["beClass"]["networkQOS"].pop("ingressLimit")
    egress_only = net_plan(validated_spec(node_slo(no_ingress)), pods)
    assert egress_only is not None and egress_only.ingress == (), "no ingress value: no ifb"
    assert net_plan(validated_spec(None), pods) is None, "no class enabled: nothing shaped"


def test_the_start_up_line_says_what_this_node_supports_and_why_not(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import threading

    env = Env(tmp_path, SLO_SPEC)
    env.agent.config.features.discard("SystemConfig")
    env.agent.config.features.add("NetQOSByTC")
    stop = threading.Event()
    stop.set()
    with caplog.at_level("INFO", logger="agent"):
        env.agent.run(stop)
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("QoS dimensions on this node")]
    assert "LLC/MBA (resctrl) yes (CAT True, MBA True" in line
    assert "disk IO yes (blkio.throttle.* with" in line
    assert "memory wmark/priority/oom yes" in line
    assert "system memory no (feature gate SystemConfig is off" in line
    assert "network no (no --net-interface given)" in line


def test_dry_run_plans_every_dimension_and_changes_nothing(tmp_path: Path) -> None:
    env = Env(tmp_path, SLO_SPEC, dry_run=True)
    before = env.snapshot()
    env.agent.tick(1000.0)
    assert env.snapshot() == before
    planned = {(w.resource, w.rel_dir.rsplit("/", 1)[-1]) for w in env.agent.executor.planned}
    assert ("blkio.throttle.read_bps_device", "besteffort") in planned
    assert ("memory.wmark_ratio", "podbe--003") in planned
    hosts = {(w.path.parent.name, w.path.name, w.value) for w in env.agent.executor.planned_host}
    assert ("BE", "schemata", "L3:0=f;1=f") in hosts and ("BE", "tasks", "4242") in hosts
    assert ("vm", "watermark_scale_factor", "150") in hosts
